//! SHA-256 over the light bits ([`super::bits`]), allocating exactly what
//! bellperson 0.27's `sha256` gadget allocates, in its order: the padding
//! (constant bits), then per 512-bit block the message schedule (two xors
//! and one four-word addition per extended word), 64 rounds whose additions
//! are deferred as the gadget defers them (e and a are kept as lists of
//! addends and summed where the next round reads them), and the additions
//! into the chaining value. Used where the PoRep circuit hashes with SHA-256:
//! the SDR labels and tree D's path (`super::challenge`).

use super::bits::{Bit, Word};
use crate::assignment::Aux;

/// SHA-256's round constants (FIPS 180-4, 4.2.2).
const K: [u32; 64] = [
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
];

/// SHA-256's initial hash value (FIPS 180-4, 5.3.3).
const H0: [u32; 8] =
    [0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19];

/// The digest of `input` (a whole number of bytes, most significant bit of
/// each byte first) as eight words; the allocated bits go onto `aux`.
pub fn sha256(input: &[Bit], aux: &mut Aux<'_>) -> [Word; 8] {
    assert!(input.len().is_multiple_of(8), "SHA-256 takes whole bytes");
    let mut message = input.to_vec();
    let length = input.len() as u64;
    message.push(Bit::Constant(true));
    while !(message.len() + 64).is_multiple_of(512) {
        message.push(Bit::Constant(false));
    }
    message.extend((0..64).rev().map(|i| Bit::Constant((length >> i) & 1 == 1)));
    let mut state = H0.map(Word::constant);
    for block in message.chunks_exact(512) {
        let mut words = [Word::constant(0); 16];
        for (word, bits) in words.iter_mut().zip(block.chunks_exact(32)) {
            *word = Word::from_bits_be(bits);
        }
        state = compress(&words, &state, aux);
    }
    state
}

/// The digest's 32 bytes (big-endian words).
pub fn digest_bytes(digest: &[Word; 8]) -> [u8; 32] {
    let mut bytes = [0u8; 32];
    for (chunk, word) in bytes.chunks_exact_mut(4).zip(digest) {
        chunk.copy_from_slice(&word.value().to_be_bytes());
    }
    bytes
}

/// A working variable whose value the gadget has not summed yet: the
/// addends of e or a, added when a round reads them.
#[derive(Clone, Copy)]
enum Pending {
    /// Already a word (the chaining value, before the first round).
    Ready(Word),
    /// `len` addends in `terms` (at most the 8 of the last a).
    Sum { terms: [Word; 8], len: usize },
}

impl Pending {
    fn sum(words: &[Word]) -> Pending {
        let mut terms = [Word::constant(0); 8];
        terms[..words.len()].copy_from_slice(words);
        Pending::Sum { terms, len: words.len() }
    }

    /// The word, adding `more` to the addends (the gadget's
    /// `Maybe::compute`: a ready word is returned as it is, without `more`,
    /// which only the final additions pass and only to pending sums).
    fn resolve(self, more: Option<Word>, aux: &mut Aux<'_>) -> Word {
        match self {
            Pending::Ready(word) => word,
            Pending::Sum { mut terms, mut len } => {
                if let Some(word) = more {
                    terms[len] = word;
                    len += 1;
                }
                Word::addmany(&terms[..len], aux)
            }
        }
    }
}

/// A round's Σ0 or Σ1: `x` rotated right three ways, xored in the
/// gadget's order (the first two, then the third).
fn big_sigma(x: Word, by: [u32; 3], aux: &mut Aux<'_>) -> Word {
    x.rotr(by[0]).xor(x.rotr(by[1]), aux).xor(x.rotr(by[2]), aux)
}

/// One compression of a 512-bit block into the chaining value `state`.
fn compress(block: &[Word; 16], state: &[Word; 8], aux: &mut Aux<'_>) -> [Word; 8] {
    let mut w = [Word::constant(0); 64];
    w[..16].copy_from_slice(block);
    for i in 16..64 {
        let s0 = w[i - 15].rotr(7).xor(w[i - 15].rotr(18), aux).xor(w[i - 15] >> 3, aux);
        let s1 = w[i - 2].rotr(17).xor(w[i - 2].rotr(19), aux).xor(w[i - 2] >> 10, aux);
        w[i] = Word::addmany(&[w[i - 16], s0, w[i - 7], s1], aux);
    }

    let mut a = Pending::Ready(state[0]);
    let [_, mut b, mut c, mut d, _, mut f, mut g, mut h] = *state;
    let mut e = Pending::Ready(state[4]);
    for i in 0..64 {
        let e_now = e.resolve(None, aux);
        let s1 = big_sigma(e_now, [6, 11, 25], aux);
        let ch = Word::ch(e_now, f, g, aux);
        let temp1 = [h, s1, ch, Word::constant(K[i]), w[i]];

        let a_now = a.resolve(None, aux);
        let s0 = big_sigma(a_now, [2, 13, 22], aux);
        let maj = Word::maj(a_now, b, c, aux);

        h = g;
        g = f;
        f = e_now;
        let mut next_e = [Word::constant(0); 6];
        next_e[..5].copy_from_slice(&temp1);
        next_e[5] = d;
        e = Pending::sum(&next_e);
        d = c;
        c = b;
        b = a_now;
        let mut next_a = [Word::constant(0); 7];
        next_a[..5].copy_from_slice(&temp1);
        next_a[5] = s0;
        next_a[6] = maj;
        a = Pending::sum(&next_a);
    }

    [
        a.resolve(Some(state[0]), aux),
        Word::addmany(&[state[1], b], aux),
        Word::addmany(&[state[2], c], aux),
        Word::addmany(&[state[3], d], aux),
        e.resolve(Some(state[4]), aux),
        Word::addmany(&[state[5], f], aux),
        Word::addmany(&[state[6], g], aux),
        Word::addmany(&[state[7], h], aux),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::assignment::AssignmentCs;
    use bellperson::gadgets::boolean::{AllocatedBit, Boolean};
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;
    use sha2::Digest;

    /// The digest's bits as the gadget returns them: each word most
    /// significant bit first.
    fn digest_bits(digest: &[Word; 8]) -> Vec<Bit> {
        digest.iter().flat_map(|w| w.bits_be()).collect()
    }

    /// Random input bits of every kind, allocated through the gadgets (so
    /// bellperson's gadget sees real `Boolean`s) and mirrored as light bits.
    fn random_input(rng: &mut ChaCha8Rng, bytes: usize, kinds: &[u8]) -> (Vec<Boolean>, Vec<Bit>, Vec<u8>) {
        let mut cs = AssignmentCs::default();
        let mut booleans = Vec::with_capacity(bytes * 8);
        let mut message = vec![0u8; bytes];
        for (k, byte) in message.iter_mut().enumerate() {
            for j in (0..8).rev() {
                let value: bool = rng.gen();
                *byte |= u8::from(value) << j;
                let kind = kinds[(k * 8 + 7 - j) % kinds.len()];
                booleans.push(match kind {
                    0 => Boolean::constant(value),
                    1 => Boolean::from(AllocatedBit::alloc(&mut cs, Some(value)).unwrap()),
                    _ => Boolean::from(AllocatedBit::alloc(&mut cs, Some(!value)).unwrap()).not(),
                });
            }
        }
        let bits = booleans.iter().map(|b| Bit::from_boolean(b).unwrap()).collect();
        (booleans, bits, message)
    }

    #[test]
    fn allocates_what_bellpersons_gadget_allocates() {
        let mut rng = ChaCha8Rng::seed_from_u64(27);
        // Kind patterns: all allocated, all constant, negations, and mixes
        // whose words hold constant and allocated bits side by side.
        let patterns: [&[u8]; 6] = [&[1], &[0], &[2], &[0, 1, 2], &[1, 1, 0, 2, 2], &[0, 0, 0, 1]];
        // 0 to 3 blocks after padding, and lengths near the block edges.
        for bytes in [0, 1, 32, 55, 56, 64, 100, 119, 120, 191] {
            for kinds in patterns {
                let (booleans, bits, message) = random_input(&mut rng, bytes, kinds);

                let mut reference = AssignmentCs::default();
                let expected = bellperson::gadgets::sha256::sha256(&mut reference, &booleans).unwrap();
                let mut ours = Aux::default();
                let digest = sha256(&bits, &mut ours);

                assert_eq!(ours.len(), reference.aux.len(), "{bytes} bytes, kinds {kinds:?}");
                assert!(
                    ours.values() == reference.aux.values(),
                    "{bytes} bytes, kinds {kinds:?}: aux differs"
                );
                let expected: Vec<Bit> = expected.iter().map(|b| Bit::from_boolean(b).unwrap()).collect();
                assert_eq!(digest_bits(&digest), expected, "{bytes} bytes, kinds {kinds:?}");
                assert_eq!(
                    digest_bytes(&digest)[..],
                    sha2::Sha256::digest(&message)[..],
                    "{bytes} bytes, kinds {kinds:?}"
                );
            }
        }
    }
}
