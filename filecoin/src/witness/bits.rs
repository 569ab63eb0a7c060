//! The light bit type of the values-only witness. Per bit it knows what
//! bellpepper's `Boolean` knows (a constant, an allocated bit, or the
//! negation of one) and its value; per 32-bit word the same for 32 bits at
//! once, as masks. Each operation allocates (pushes a value onto the
//! partition's aux assignment) in exactly the cases and the order in which
//! bellpepper's `Boolean` and bellperson's `UInt32` gadgets call `alloc`,
//! and nothing else: no variable, no linear combination, no constraint,
//! since compiled evaluation takes those from the circuit's matrices.
//!
//! The rules, as the gadgets (bellpepper-core 0.2.1 `boolean.rs`, bellperson
//! 0.27.0 `uint32.rs`) apply them:
//! - xor: a constant operand allocates nothing (false: the other bit; true:
//!   its negation); two non-constant bits allocate their underlying bits' xor,
//!   negated when exactly one operand is a negation.
//! - and: false with anything is false, true with x is x, two non-constant
//!   bits allocate their values' and.
//! - ch and maj: per bit a table of constant cases that fall back to `and`
//!   (see [`ch_bit`], [`maj_bit`]); with no constant, ch allocates its value
//!   and maj allocates its value, then `b and c`.
//! - addmany of n words: nothing when every bit of every operand is
//!   constant, else as many result bits as the bit length of n·(2^32 − 1),
//!   the sum's bits least significant first; the result keeps the low 32.

use ark_bls12_381::Fr;
use ark_ff::{One, Zero};
use bellperson::gadgets::boolean::Boolean;
use bellperson::SynthesisError;
use std::ops::{Not, Shr};

use crate::assignment::Aux;

/// One bit as bellpepper's `Boolean` knows it. The value is always the
/// bit's own (for `Not`, the negation of the allocated bit's).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bit {
    /// `Boolean::Constant`: no variable behind it.
    Constant(bool),
    /// `Boolean::Is`: an allocated bit.
    Is(bool),
    /// `Boolean::Not`: the negation of an allocated bit.
    Not(bool),
}

impl Bit {
    /// What the bit stands for.
    pub fn value(self) -> bool {
        match self {
            Bit::Constant(v) | Bit::Is(v) | Bit::Not(v) => v,
        }
    }

    /// The bit a gadget handed out; its value must be known (assignment
    /// mode always knows it).
    pub fn from_boolean(b: &Boolean) -> Result<Bit, SynthesisError> {
        let value = b.get_value().ok_or(SynthesisError::AssignmentMissing)?;
        Ok(match b {
            Boolean::Constant(_) => Bit::Constant(value),
            Boolean::Is(_) => Bit::Is(value),
            Boolean::Not(_) => Bit::Not(value),
        })
    }
}

/// `Boolean::not`: never allocates.
impl Not for Bit {
    type Output = Bit;

    fn not(self) -> Bit {
        match self {
            Bit::Constant(v) => Bit::Constant(!v),
            Bit::Is(v) => Bit::Not(!v),
            Bit::Not(v) => Bit::Is(!v),
        }
    }
}

/// Appends one allocated bit's value to the aux assignment.
#[inline]
fn push(aux: &mut Aux<'_>, bit: bool) {
    aux.push(if bit { Fr::one() } else { Fr::zero() });
}

/// Appends the low `count` bits of `bits`, least significant first.
#[inline]
fn push_low(aux: &mut Aux<'_>, bits: u64, count: u32) {
    for i in 0..count {
        push(aux, (bits >> i) & 1 == 1);
    }
}

/// Appends the bits of `bits` at the positions set in `mask`, least
/// significant first.
#[inline]
fn push_masked(aux: &mut Aux<'_>, bits: u32, mask: u32) {
    if mask == u32::MAX {
        push_low(aux, u64::from(bits), 32);
        return;
    }
    let mut rest = mask;
    while rest != 0 {
        let i = rest.trailing_zeros();
        push(aux, (bits >> i) & 1 == 1);
        rest &= rest - 1;
    }
}

/// `Boolean::and`.
fn and(x: Bit, y: Bit, aux: &mut Aux<'_>) -> Bit {
    match (x, y) {
        (Bit::Constant(false), _) | (_, Bit::Constant(false)) => Bit::Constant(false),
        (Bit::Constant(true), other) | (other, Bit::Constant(true)) => other,
        _ => {
            let value = x.value() & y.value();
            push(aux, value);
            Bit::Is(value)
        }
    }
}

/// `Boolean::sha256_ch`: (a and b) xor (not a and c). The arms are the
/// gadget's, in its order (the first that matches decides).
fn ch_bit(a: Bit, b: Bit, c: Bit, aux: &mut Aux<'_>) -> Bit {
    use Bit::Constant as K;
    let value = (a.value() & b.value()) ^ (!a.value() & c.value());
    match (a, b, c) {
        (K(_), K(_), K(_)) => K(value),
        (K(false), _, c) => c,
        (a, K(false), c) => and(!a, c, aux),
        (a, b, K(false)) => and(a, b, aux),
        (a, b, K(true)) => !and(a, !b, aux),
        (a, K(true), c) => !and(!a, !c, aux),
        // a constant true with b and c allocated, or nothing constant.
        _ => {
            push(aux, value);
            Bit::Is(value)
        }
    }
}

/// `Boolean::sha256_maj`: the majority of a, b and c, arms in the gadget's
/// order; with nothing constant it allocates the result, then `b and c`.
fn maj_bit(a: Bit, b: Bit, c: Bit, aux: &mut Aux<'_>) -> Bit {
    use Bit::Constant as K;
    let value = (a.value() & b.value()) ^ (a.value() & c.value()) ^ (b.value() & c.value());
    match (a, b, c) {
        (K(_), K(_), K(_)) => K(value),
        (K(false), b, c) => and(b, c, aux),
        (a, K(false), c) => and(a, c, aux),
        (a, b, K(false)) => and(a, b, aux),
        (a, b, K(true)) => !and(!a, !b, aux),
        (a, K(true), c) => !and(!a, !c, aux),
        (K(true), b, c) => !and(!b, !c, aux),
        _ => {
            push(aux, value);
            and(b, c, aux);
            Bit::Is(value)
        }
    }
}

/// `UInt32::shr`: the vacated high bits are constant false.
impl Shr<u32> for Word {
    type Output = Word;

    fn shr(self, by: u32) -> Word {
        if by == 0 {
            return self;
        }
        Word {
            value: self.value >> by,
            constant: (self.constant >> by) | !(u32::MAX >> by),
            negated: self.negated >> by,
        }
    }
}

/// 32 bits as bellperson's `UInt32` holds them: bit i of each mask is the
/// word's bit i (`UInt32`'s bits run least significant first).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Word {
    /// Each bit's value.
    value: u32,
    /// Which bits are constants.
    constant: u32,
    /// Which non-constant bits are negations (`Not`); zero at constants.
    negated: u32,
}

impl Word {
    /// `UInt32::constant`.
    pub fn constant(value: u32) -> Word {
        Word { value, constant: u32::MAX, negated: 0 }
    }

    /// `UInt32::from_bits_be`: `bits[0]` is the most significant.
    pub fn from_bits_be(bits: &[Bit]) -> Word {
        assert_eq!(bits.len(), 32, "a word is 32 bits");
        Word::from_fn(|i| bits[31 - i as usize])
    }

    /// The word's value.
    pub fn value(self) -> u32 {
        self.value
    }

    /// Bit `i` (least significant first).
    fn bit(self, i: u32) -> Bit {
        let value = (self.value >> i) & 1 == 1;
        if (self.constant >> i) & 1 == 1 {
            Bit::Constant(value)
        } else if (self.negated >> i) & 1 == 1 {
            Bit::Not(value)
        } else {
            Bit::Is(value)
        }
    }

    /// `UInt32::into_bits_be`: most significant first.
    pub fn bits_be(self) -> impl Iterator<Item = Bit> {
        (0..32).rev().map(move |i| self.bit(i))
    }

    /// A word of 32 bits given least significant first.
    fn from_fn(mut bit: impl FnMut(u32) -> Bit) -> Word {
        let mut word = Word { value: 0, constant: 0, negated: 0 };
        for i in 0..32 {
            let at = 1u32 << i;
            match bit(i) {
                Bit::Constant(v) => {
                    word.constant |= at;
                    word.value |= if v { at } else { 0 };
                }
                Bit::Is(v) => word.value |= if v { at } else { 0 },
                Bit::Not(v) => {
                    word.negated |= at;
                    word.value |= if v { at } else { 0 };
                }
            }
        }
        word
    }

    /// `UInt32::rotr`.
    pub fn rotr(self, by: u32) -> Word {
        Word {
            value: self.value.rotate_right(by),
            constant: self.constant.rotate_right(by),
            negated: self.negated.rotate_right(by),
        }
    }

    /// `UInt32::xor`, bit by bit from the least significant.
    pub fn xor(self, other: Word, aux: &mut Aux<'_>) -> Word {
        let both = !self.constant & !other.constant;
        // An allocated bit under a negation holds the opposite value.
        let underlying = (self.value ^ self.negated) ^ (other.value ^ other.negated);
        push_masked(aux, underlying, both);
        let constant = self.constant & other.constant;
        // A constant true operand negates the other bit; two non-constant
        // bits give a negation when exactly one of them is one.
        let negated =
            (self.negated ^ other.negated ^ (self.value & self.constant) ^ (other.value & other.constant))
                & !constant;
        Word { value: self.value ^ other.value, constant, negated }
    }

    /// `UInt32::sha256_ch(a, b, c)`.
    pub fn ch(a: Word, b: Word, c: Word, aux: &mut Aux<'_>) -> Word {
        if a.constant | b.constant | c.constant == 0 {
            let value = (a.value & b.value) ^ (!a.value & c.value);
            push_low(aux, u64::from(value), 32);
            return Word { value, constant: 0, negated: 0 };
        }
        Word::from_fn(|i| ch_bit(a.bit(i), b.bit(i), c.bit(i), aux))
    }

    /// `UInt32::sha256_maj(a, b, c)`.
    pub fn maj(a: Word, b: Word, c: Word, aux: &mut Aux<'_>) -> Word {
        if a.constant | b.constant | c.constant == 0 {
            let value = (a.value & b.value) ^ (a.value & c.value) ^ (b.value & c.value);
            let bc = b.value & c.value;
            for i in 0..32 {
                push(aux, (value >> i) & 1 == 1);
                push(aux, (bc >> i) & 1 == 1);
            }
            return Word { value, constant: 0, negated: 0 };
        }
        Word::from_fn(|i| maj_bit(a.bit(i), b.bit(i), c.bit(i), aux))
    }

    /// `UInt32::addmany` of 2 to 10 words.
    pub fn addmany(operands: &[Word], aux: &mut Aux<'_>) -> Word {
        assert!((2..=10).contains(&operands.len()), "addmany takes 2 to 10 operands");
        let sum: u64 = operands.iter().map(|w| u64::from(w.value)).sum();
        if operands.iter().all(|w| w.constant == u32::MAX) {
            return Word::constant(sum as u32);
        }
        let max = operands.len() as u64 * u64::from(u32::MAX);
        push_low(aux, sum, u64::BITS - max.leading_zeros());
        Word { value: sum as u32, constant: 0, negated: 0 }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::assignment::AssignmentCs;
    use bellperson::gadgets::boolean::AllocatedBit;
    use bellperson::gadgets::multieq::MultiEq;
    use bellperson::gadgets::uint32::UInt32;

    /// Every kind of bit with every value.
    const ALL: [Bit; 6] = [
        Bit::Constant(false),
        Bit::Constant(true),
        Bit::Is(false),
        Bit::Is(true),
        Bit::Not(false),
        Bit::Not(true),
    ];

    #[test]
    fn word_bits_round_trip() {
        let bits: Vec<Bit> = (0..32).map(|i| ALL[(i * 7 + 3) % 6]).collect();
        let word = Word::from_bits_be(&bits);
        assert_eq!(word.bits_be().collect::<Vec<_>>(), bits);
        assert_eq!(Word::from_fn(|i| word.bit(i)), word);
    }

    /// `bits` (least significant first) as bellperson's `UInt32`, the
    /// allocated ones allocated in a scratch system.
    fn gadget_word(bits: &[Bit]) -> UInt32 {
        let mut scratch = AssignmentCs::default();
        let booleans: Vec<Boolean> = bits
            .iter()
            .map(|&bit| match bit {
                Bit::Constant(v) => Boolean::constant(v),
                Bit::Is(v) => AllocatedBit::alloc(&mut scratch, Some(v)).unwrap().into(),
                Bit::Not(v) => Boolean::from(AllocatedBit::alloc(&mut scratch, Some(!v)).unwrap()).not(),
            })
            .collect();
        UInt32::from_bits(&booleans)
    }

    fn light_bits(word: UInt32) -> Vec<Bit> {
        word.into_bits().iter().map(|b| Bit::from_boolean(b).unwrap()).collect()
    }

    /// Words a, b, c whose bits together hold every triple of kinds and
    /// values (6^3 = 216 of them, over 7 words of 32 bits), then words
    /// without constants (where the operations take their word-wide paths):
    /// allocated bits only, and allocated and negated bits mixed.
    fn every_triple() -> Vec<[Vec<Bit>; 3]> {
        let mixed = (0..7).map(|w| {
            let at = |k: usize| -> Vec<Bit> {
                (0..32)
                    .map(|i| {
                        let combo = (w * 32 + i) % 216;
                        ALL[(combo / [1, 6, 36][k]) % 6]
                    })
                    .collect()
            };
            [at(0), at(1), at(2)]
        });
        let free = [2, 4].map(|kinds| {
            let at = |k: usize| -> Vec<Bit> {
                (0..32).map(|i| ALL[2 + (i * 5 + k * 3 + i / 7) % kinds]).collect()
            };
            [at(0), at(1), at(2)]
        });
        mixed.chain(free).collect()
    }

    /// Runs `ours` and `theirs` (the gadget) on fresh recordings and
    /// requires the same result bits and the same aux values.
    fn same(
        what: &str,
        ours: impl FnOnce(&mut Aux<'_>) -> Word,
        theirs: impl FnOnce(&mut AssignmentCs<'_>) -> UInt32,
    ) {
        let (mut our_aux, mut their_cs) = (Aux::default(), AssignmentCs::default());
        let word = ours(&mut our_aux);
        let expected = light_bits(theirs(&mut their_cs));
        assert_eq!((0..32).map(|i| word.bit(i)).collect::<Vec<_>>(), expected, "{what}");
        assert!(our_aux.values() == their_cs.aux.values(), "{what} allocates differently");
    }

    #[test]
    fn word_operations_allocate_as_the_gadgets_do() {
        for [a, b, c] in every_triple() {
            let word = |bits: &[Bit]| Word::from_fn(|i| bits[i as usize]);
            let (wa, wb, wc) = (word(&a), word(&b), word(&c));
            let (ga, gb, gc) = (gadget_word(&a), gadget_word(&b), gadget_word(&c));
            same("xor", |aux| wa.xor(wb, aux), |cs| ga.xor(cs, &gb).unwrap());
            same("ch", |aux| Word::ch(wa, wb, wc, aux), |cs| UInt32::sha256_ch(cs, &ga, &gb, &gc).unwrap());
            same(
                "maj",
                |aux| Word::maj(wa, wb, wc, aux),
                |cs| UInt32::sha256_maj(cs, &ga, &gb, &gc).unwrap(),
            );
            for n in 2..=10 {
                let words: Vec<Word> = [wa, wb, wc].into_iter().cycle().take(n).collect();
                let gadgets: Vec<UInt32> = [&ga, &gb, &gc].into_iter().cycle().take(n).cloned().collect();
                same(
                    &format!("addmany of {n}"),
                    |aux| Word::addmany(&words, aux),
                    |cs| UInt32::addmany(&mut MultiEq::new(cs), &gadgets).unwrap(),
                );
            }
        }
    }

    #[test]
    fn constant_words_allocate_nothing() {
        let (a, b, c) = (Word::constant(0x1234_5678), Word::constant(0x9abc_def0), Word::constant(7));
        let mut aux = Aux::default();
        let sum = Word::addmany(&[a, b, c], &mut aux);
        let mixed = Word::ch(a, b, c, &mut aux).xor(Word::maj(a, b, c, &mut aux), &mut aux);
        assert!(aux.is_empty());
        assert_eq!(sum, Word::constant(0x1234_5678u32.wrapping_add(0x9abc_def0).wrapping_add(7)));
        assert_eq!(
            mixed.value(),
            ((a.value() & b.value()) ^ (!a.value() & c.value()))
                ^ ((a.value() & b.value()) ^ (a.value() & c.value()) ^ (b.value() & c.value()))
        );
    }

    #[test]
    fn shr_fills_with_constant_false() {
        let word = Word::from_fn(|_| Bit::Is(true));
        let shifted = word >> 3;
        assert_eq!(shifted.value(), u32::MAX >> 3);
        assert!((29..32).all(|i| shifted.bit(i) == Bit::Constant(false)));
        assert!((0..29).all(|i| shifted.bit(i) == Bit::Is(true)));
    }
}
