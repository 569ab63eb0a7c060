//! JSON read without building a tree. A `serde_json::Value` costs tens of
//! times its text (a 32-byte slot per value, a B-tree node of about 640
//! bytes per small object), so a submission is never read into one whole:
//! its canonical form (compact, object keys sorted, the last of a
//! duplicated key kept: exactly what `Value::to_string` writes) is written
//! in one streaming pass ([`canonical`]), a field kept as text is
//! [`JsonText`], and a value a family must see as a tree is first costed by
//! another streaming pass ([`tree_bytes`]) and refused when its tree would
//! be too large for its text.

use std::cell::Cell;
use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;

/// One JSON value's canonical text: what a job keeps of a field it does not
/// need as a typed value, read from its text as `canonical` writes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JsonText(String);

impl JsonText {
    /// `{}`: a field's value when the request has none.
    pub fn empty_object() -> Self {
        JsonText("{}".into())
    }

    /// The value's canonical JSON text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl From<JsonText> for String {
    fn from(text: JsonText) -> Self {
        text.0
    }
}

impl<'de> Deserialize<'de> for JsonText {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let left = Cell::new(Some(usize::MAX));
        let mut out = Vec::new();
        deserializer.deserialize_any(Canonical { out: &mut out, left: &left })?;
        // Only whole UTF-8 strings and ASCII were written.
        Ok(JsonText(String::from_utf8(out).expect("canonical JSON is UTF-8")))
    }
}

/// A JSON object written member by member, compact: canonical when the
/// members come in the order of their keys, as every writer here gives
/// them (debug builds check). What a typed submission is serialized with,
/// without building a tree or copying a [`JsonText`] member's text twice.
pub struct JsonObject<'a> {
    out: &'a mut Vec<u8>,
    /// The key written last.
    last: Option<&'static str>,
}

impl JsonObject<'_> {
    /// Writes to `out` the object whose members `members` writes.
    pub fn write(out: &mut Vec<u8>, members: impl FnOnce(&mut JsonObject)) {
        out.push(b'{');
        members(&mut JsonObject { out: &mut *out, last: None });
        out.push(b'}');
    }

    fn key(&mut self, key: &'static str) {
        debug_assert!(self.last.is_none_or(|last| last < key), "{key} written after {:?}", self.last);
        if self.last.is_some() {
            self.out.push(b',');
        }
        self.last = Some(key);
        serde_json::to_writer(&mut *self.out, key).expect("a key writes to memory");
        self.out.push(b':');
    }

    /// A member whose value serde writes (a scalar, a string, a list of them).
    pub fn member<T: serde::Serialize + ?Sized>(&mut self, key: &'static str, value: &T) {
        self.key(key);
        serde_json::to_writer(&mut *self.out, value).expect("a scalar writes to memory");
    }

    /// As `member`, left out when there is no value.
    pub fn member_if<T: serde::Serialize>(&mut self, key: &'static str, value: Option<&T>) {
        if let Some(value) = value {
            self.member(key, value);
        }
    }

    /// A member whose value is canonical text already, copied as it is.
    pub fn text(&mut self, key: &'static str, value: &JsonText) {
        self.key(key);
        self.out.extend_from_slice(value.0.as_bytes());
    }

    /// A member that is an object, whose members `members` writes.
    pub fn object(&mut self, key: &'static str, members: impl FnOnce(&mut JsonObject)) {
        self.key(key);
        JsonObject::write(self.out, members);
    }
}

/// Why a text has no canonical form within its limit.
#[derive(Debug)]
pub enum CanonicalError {
    /// Not JSON (serde_json's reason).
    NotJson(serde_json::Error),
    /// The canonical form passed the limit; the pass stopped there.
    TooLarge,
}

/// The canonical form of the JSON `text`, refused as soon as it passes
/// `limit` bytes. Beyond the output, the pass holds one object's members
/// at a time per level of nesting (their text and a 12-byte index each)
/// while it sorts them.
pub fn canonical(text: &[u8], limit: usize) -> Result<String, CanonicalError> {
    let left = Cell::new(Some(limit));
    let mut out = Vec::new();
    let mut deserializer = serde_json::Deserializer::from_slice(text);
    let read = deserializer
        .deserialize_any(Canonical { out: &mut out, left: &left })
        .and_then(|()| deserializer.end());
    match read {
        Ok(()) => Ok(String::from_utf8(out).expect("canonical JSON is UTF-8")),
        Err(_) if left.get().is_none() => Err(CanonicalError::TooLarge),
        Err(error) => Err(CanonicalError::NotJson(error)),
    }
}

/// Writes one value's canonical form to `out`, counting what it writes
/// against `left`.
struct Canonical<'a> {
    /// The value's text goes here.
    out: &'a mut Vec<u8>,
    /// Bytes the whole text may still take (None once it passed them);
    /// every byte is counted once, where it is first written (a member's
    /// text copied into its object is not counted again).
    left: &'a Cell<Option<usize>>,
}

impl Canonical<'_> {
    fn count<E: de::Error>(&self, bytes: usize) -> Result<(), E> {
        let left = self.left.get().and_then(|left| left.checked_sub(bytes));
        self.left.set(left);
        match left {
            Some(_) => Ok(()),
            None => Err(E::custom("the canonical JSON passes its limit")),
        }
    }

    fn write<E: de::Error>(&mut self, bytes: &[u8]) -> Result<(), E> {
        self.count(bytes.len())?;
        self.out.extend_from_slice(bytes);
        Ok(())
    }

    /// A scalar as serde_json writes it (and so as `Value` does).
    fn scalar<E: de::Error, T: serde::Serialize + ?Sized>(&mut self, value: &T) -> Result<(), E> {
        let start = self.out.len();
        serde_json::to_writer(&mut *self.out, value).map_err(E::custom)?;
        self.count(self.out.len() - start)
    }

    fn child(&mut self) -> Canonical<'_> {
        Canonical { out: self.out, left: self.left }
    }
}

impl<'de> DeserializeSeed<'de> for Canonical<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Canonical<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E: de::Error>(mut self, v: bool) -> Result<(), E> {
        self.scalar(&v)
    }

    fn visit_i64<E: de::Error>(mut self, v: i64) -> Result<(), E> {
        self.scalar(&v)
    }

    fn visit_u64<E: de::Error>(mut self, v: u64) -> Result<(), E> {
        self.scalar(&v)
    }

    fn visit_f64<E: de::Error>(mut self, v: f64) -> Result<(), E> {
        // As `Value` keeps it: a float that is not finite is null.
        self.scalar(&serde_json::Number::from_f64(v))
    }

    fn visit_str<E: de::Error>(mut self, v: &str) -> Result<(), E> {
        self.scalar(v)
    }

    fn visit_unit<E: de::Error>(mut self) -> Result<(), E> {
        self.write(b"null")
    }

    fn visit_seq<A: SeqAccess<'de>>(mut self, mut seq: A) -> Result<(), A::Error> {
        self.write(b"[")?;
        let mut first = true;
        loop {
            let at = self.out.len();
            if !first {
                self.write(b",")?;
            }
            if seq.next_element_seed(self.child())?.is_none() {
                // No element after that comma.
                if !first {
                    self.out.truncate(at);
                    self.left.set(self.left.get().map(|left| left + 1));
                }
                break;
            }
            first = false;
        }
        self.write(b"]")
    }

    fn visit_map<A: MapAccess<'de>>(mut self, mut map: A) -> Result<(), A::Error> {
        // The members, each its raw key then its value's canonical text,
        // and where each starts: sorted by key once all are read.
        let mut members: Vec<u8> = Vec::new();
        let mut index: Vec<[u32; 3]> = Vec::new();
        let offset = |n: usize| u32::try_from(n).map_err(|_| de::Error::custom("an object over 4 GiB"));
        while let Some(key) = map.next_key::<Key>()? {
            let start = offset(members.len())?;
            members.extend_from_slice(key.0.as_bytes());
            let key_end = offset(members.len())?;
            map.next_value_seed(Canonical { out: &mut members, left: self.left })?;
            index.push([start, key_end, offset(members.len())?]);
        }
        let key = |m: &[u32; 3]| &members[m[0] as usize..m[1] as usize];
        // Stable: of a duplicated key, the last one read sorts last.
        index.sort_by(|a, b| key(a).cmp(key(b)));
        self.write(b"{")?;
        let mut first = true;
        for (i, member) in index.iter().enumerate() {
            if index.get(i + 1).is_some_and(|next| key(next) == key(member)) {
                continue;
            }
            if !first {
                self.write(b",")?;
            }
            first = false;
            let name = std::str::from_utf8(key(member)).expect("keys are read as strings");
            self.scalar(name)?;
            self.write(b":")?;
            self.out.extend_from_slice(&members[member[1] as usize..member[2] as usize]);
        }
        self.write(b"}")
    }
}

/// An object's key, as read (copied only when it has escapes).
struct Key<'de>(std::borrow::Cow<'de, str>);

impl<'de> Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl<'de> Visitor<'de> for KeyVisitor {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a key")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Key<'de>, E> {
                Ok(Key(v.into()))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Key<'de>, E> {
                Ok(Key(v.to_owned().into()))
            }
        }
        deserializer.deserialize_str(KeyVisitor)
    }
}

/// The canonical text of the first `keep` entries of the JSON array
/// `text`, and how many entries it has (the rest are counted, not kept);
/// `None` when `text` is not an array.
pub fn array_entries(text: &str, keep: usize) -> Result<Option<(Vec<JsonText>, usize)>, serde_json::Error> {
    struct Entries {
        keep: usize,
    }
    impl<'de> Visitor<'de> for Entries {
        type Value = Option<(Vec<JsonText>, usize)>;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("any JSON value")
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
            let mut kept = Vec::new();
            let mut count = 0;
            while kept.len() < self.keep {
                match seq.next_element::<JsonText>()? {
                    Some(entry) => kept.push(entry),
                    None => return Ok(Some((kept, count))),
                }
                count += 1;
            }
            while seq.next_element::<IgnoredAny>()?.is_some() {
                count += 1;
            }
            Ok(Some((kept, count)))
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
            Ok(None)
        }
        fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_str<E: de::Error>(self, _: &str) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
    }
    serde_json::Deserializer::from_str(text).deserialize_any(Entries { keep })
}

/// What a `serde_json::Value` of `text` would allocate, estimated from
/// std's layouts without building it: a 32-byte slot per value (an
/// array's vector grows by doubling), a B-tree node (11 members, about 640
/// bytes, one per 5 members at worst) per object, and each string's and
/// key's own bytes with the allocator's 16-byte rounding.
pub fn tree_bytes(text: &str) -> Result<usize, serde_json::Error> {
    serde_json::Deserializer::from_str(text).deserialize_any(TreeCost).map(|inner| inner + SLOT)
}

/// A `Value`'s own size.
const SLOT: usize = 32;
/// A B-tree node of `String` keys and `Value`s, as allocated.
const NODE: usize = 640;

/// A heap block of `len` bytes, as the allocator rounds it.
fn heap(len: usize) -> usize {
    if len == 0 {
        0
    } else {
        (len + 8).div_ceil(16) * 16
    }
}

/// What one value allocates beyond its own slot.
struct TreeCost;

impl<'de> DeserializeSeed<'de> for TreeCost {
    type Value = usize;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<usize, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for TreeCost {
    type Value = usize;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<usize, E> {
        Ok(0)
    }

    fn visit_i64<E: de::Error>(self, _: i64) -> Result<usize, E> {
        Ok(0)
    }

    fn visit_u64<E: de::Error>(self, _: u64) -> Result<usize, E> {
        Ok(0)
    }

    fn visit_f64<E: de::Error>(self, _: f64) -> Result<usize, E> {
        Ok(0)
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<usize, E> {
        Ok(heap(v.len()))
    }

    fn visit_unit<E: de::Error>(self) -> Result<usize, E> {
        Ok(0)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<usize, A::Error> {
        let (mut entries, mut inner) = (0usize, 0usize);
        while let Some(cost) = seq.next_element_seed(TreeCost)? {
            entries += 1;
            inner = inner.saturating_add(cost);
        }
        let capacity = if entries == 0 { 0 } else { entries.next_power_of_two().max(4) };
        Ok(inner.saturating_add(heap(capacity * SLOT)))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<usize, A::Error> {
        let (mut members, mut inner) = (0usize, 0usize);
        while let Some(key) = map.next_key::<Key>()? {
            let cost = map.next_value_seed(TreeCost)?;
            members += 1;
            inner = inner.saturating_add(heap(key.0.len())).saturating_add(cost);
        }
        Ok(inner.saturating_add(members.div_ceil(5) * NODE))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    /// The streaming pass writes what a `Value` tree writes, byte for byte:
    /// the store's records and idempotency digests do not change.
    #[test]
    fn canonical_is_what_a_value_writes() {
        for text in [
            r#"{"b":1,"a":[1,2.5,-3,1e3,true,null,"x\u0001\"é"],"c":{"z":{},"y":[]}}"#,
            r#" { "k" : 1 , "k" : 2 , "j" : { "k": [ ] } } "#,
            r#"[{"b":0,"a":0},{}, [ [ ] ] , 18446744073709551615, -9223372036854775808, 1.0, 0.1]"#,
            r#"{"\u00e9":1,"e":2,"\n":3,"":4}"#,
            r#""just a string""#,
            "123456789012345678901234567890",
        ] {
            let tree: Value = serde_json::from_str(text).unwrap();
            assert_eq!(canonical(text.as_bytes(), usize::MAX).unwrap(), tree.to_string(), "{text}");
            let field: JsonText = serde_json::from_str(text).unwrap();
            assert_eq!(field.as_str(), tree.to_string());
        }
        assert!(matches!(canonical(b"{\"a\":", usize::MAX), Err(CanonicalError::NotJson(_))));
        assert!(matches!(canonical(b"{} x", usize::MAX), Err(CanonicalError::NotJson(_))));
    }

    /// The limit stops the pass at the byte that passes it, and not before.
    #[test]
    fn canonical_stops_at_its_limit() {
        let text = br#"{ "b" : [1, 2, 3], "a" : "xyz" }"#;
        let full = canonical(text, usize::MAX).unwrap();
        assert_eq!(canonical(text, full.len()).unwrap(), full);
        assert!(matches!(canonical(text, full.len() - 1), Err(CanonicalError::TooLarge)));
        let duplicated = br#"{"a":"0123456789","a":1}"#;
        assert!(matches!(canonical(duplicated, 8), Err(CanonicalError::TooLarge)), "counted as sent");
    }

    #[test]
    fn array_entries_keeps_the_first_and_counts_the_rest() {
        let (kept, count) = array_entries(r#"[ {"b":1,"a":2}, 3, [4] ]"#, 2).unwrap().unwrap();
        assert_eq!(count, 3);
        assert_eq!(kept.iter().map(JsonText::as_str).collect::<Vec<_>>(), [r#"{"a":2,"b":1}"#, "3"]);
        assert_eq!(array_entries(r#"{"a":[1]}"#, 2).unwrap(), None);
        assert_eq!(array_entries("[]", 2).unwrap(), Some((vec![], 0)));
    }

    /// Small objects cost tens of times their text as a tree; long strings
    /// little more than theirs.
    #[test]
    fn tree_bytes_tells_small_objects_from_strings() {
        let objects = format!("[{}]", vec![r#"{"a":0}"#; 10_000].join(","));
        let cost = tree_bytes(&objects).unwrap();
        assert!(cost > 60 * objects.len(), "{cost} for {}", objects.len());
        let leaves = format!("[{}]", vec![format!("\"{}\"", "7".repeat(60)); 10_000].join(","));
        let cost = tree_bytes(&leaves).unwrap();
        assert!(cost < 3 * leaves.len(), "{cost} for {}", leaves.len());
    }
}
