//! Reading circuit params and witness inputs from JSON: field elements,
//! bounded integers, arrays and objects with a fixed set of keys.
//!
//! Every reader takes the path of the value it reads (`params.depth`,
//! `inputs.paths[1].siblings[0]`) so that an [`InputError`] tells the client
//! exactly which value is wrong.

use std::ops::RangeInclusive;

use ark_ff::{BigInteger256, PrimeField};
use serde_json::{Map, Value};

use super::InputError;
use crate::Fr;

/// How clients write field elements, for the families' `describe()`.
pub const FIELD_ELEMENT_FORMAT: &str = "a decimal string, a 0x-prefixed big-endian hex string, \
     or a JSON integer; below the BLS12-381 scalar field modulus";

/// Parses a field element: a decimal string, a `0x`-prefixed big-endian hex
/// string, or a non-negative JSON integer. Values are never reduced: anything
/// at or above the modulus is an error, so that a client's typo cannot alias
/// another element.
pub fn parse_fr(value: &Value, path: &str) -> Result<Fr, InputError> {
    match value {
        Value::String(text) => match text.strip_prefix("0x") {
            Some(hex_digits) => parse_digits(hex_digits, 16, path),
            None if text.starts_with('-') => {
                Err(InputError::new(format!("{path}: field elements cannot be negative")))
            }
            None => parse_digits(text, 10, path),
        },
        Value::Number(number) => match number.as_u64() {
            Some(small) => Ok(Fr::from(small)),
            None if number.as_i64().is_some() => {
                Err(InputError::new(format!("{path}: field elements cannot be negative")))
            }
            None => Err(InputError::new(format!(
                "{path}: {number} is not an integer below 2^64; write larger field elements as strings"
            ))),
        },
        other => Err(InputError::new(format!(
            "{path}: expected a field element (decimal string, 0x hex string or integer), got {}",
            json_type_name(other)
        ))),
    }
}

/// A field element as JSON: its canonical decimal string.
pub fn fr_to_json(value: &Fr) -> Value {
    Value::String(value.to_string())
}

/// Parses a JSON integer within `range`.
pub fn parse_integer(value: &Value, path: &str, range: RangeInclusive<u64>) -> Result<u64, InputError> {
    value.as_u64().filter(|n| range.contains(n)).ok_or_else(|| {
        InputError::new(format!(
            "{path} must be an integer in {}..={}, got {value}",
            range.start(),
            range.end()
        ))
    })
}

/// Reads `value` as a JSON object whose keys all belong to `allowed_keys`.
pub fn parse_object<'a>(
    value: &'a Value,
    path: &str,
    allowed_keys: &[&str],
) -> Result<&'a Map<String, Value>, InputError> {
    let object = value
        .as_object()
        .ok_or_else(|| InputError::new(format!("{path} must be an object, got {}", json_type_name(value))))?;
    if let Some(unknown) = object.keys().find(|key| !allowed_keys.contains(&key.as_str())) {
        return Err(InputError::new(format!(
            "{path} has an unknown key \"{unknown}\"; allowed: {}",
            allowed_keys.join(", ")
        )));
    }
    Ok(object)
}

/// The value under `key`, which must be present.
pub fn required<'a>(object: &'a Map<String, Value>, path: &str, key: &str) -> Result<&'a Value, InputError> {
    object.get(key).ok_or_else(|| InputError::new(format!("{path}.{key} is required")))
}

/// Reads `value` as a JSON array of exactly `expected_len` elements, each
/// parsed by `parse_element` with its own path (`path[i]`).
pub fn parse_array<T>(
    value: &Value,
    path: &str,
    expected_len: usize,
    parse_element: impl Fn(&Value, &str) -> Result<T, InputError>,
) -> Result<Vec<T>, InputError> {
    let items = value
        .as_array()
        .ok_or_else(|| InputError::new(format!("{path} must be an array, got {}", json_type_name(value))))?;
    if items.len() != expected_len {
        return Err(InputError::new(format!(
            "{path} must have {expected_len} elements, got {}",
            items.len()
        )));
    }
    items.iter().enumerate().map(|(i, item)| parse_element(item, &format!("{path}[{i}]"))).collect()
}

/// The most digits a field element may be written with: the modulus has 78
/// decimal and 64 hex digits. Padding beyond that is refused before any
/// arithmetic, so a megabyte of zeros costs a length check, not a parse.
fn max_digits(radix: u32) -> usize {
    if radix == 16 {
        64
    } else {
        78
    }
}

fn parse_digits(digits: &str, radix: u32, path: &str) -> Result<Fr, InputError> {
    if digits.is_empty() {
        return Err(InputError::new(format!("{path}: empty field element")));
    }
    if digits.len() > max_digits(radix) {
        return Err(InputError::new(format!(
            "{path}: {} digits; a field element has at most {} (no padding beyond that)",
            digits.len(),
            max_digits(radix)
        )));
    }
    let too_large = || InputError::new(format!("{path}: not less than the BLS12-381 scalar field modulus"));
    let mut limbs = [0u64; 4];
    for ch in digits.chars() {
        let digit = ch.to_digit(radix).ok_or_else(|| {
            let kind = if radix == 16 { "hex" } else { "decimal" };
            InputError::new(format!("{path}: {ch:?} is not a {kind} digit"))
        })?;
        if !multiply_add(&mut limbs, u64::from(radix), u64::from(digit)) {
            return Err(too_large());
        }
    }
    Fr::from_bigint(BigInteger256::new(limbs)).ok_or_else(too_large)
}

/// limbs = limbs * factor + addend on a little-endian 256-bit integer;
/// false when the result does not fit in 256 bits.
fn multiply_add(limbs: &mut [u64; 4], factor: u64, addend: u64) -> bool {
    let mut carry = u128::from(addend);
    for limb in limbs.iter_mut() {
        let wide = u128::from(*limb) * u128::from(factor) + carry;
        *limb = wide as u64;
        carry = wide >> 64;
    }
    carry == 0
}

fn json_type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ark_ff::{BigInteger, Field};
    use serde_json::json;

    fn modulus_decimal() -> String {
        Fr::MODULUS.to_string()
    }

    #[test]
    fn parses_the_three_forms() {
        assert_eq!(parse_fr(&json!("12345"), "x").unwrap(), Fr::from(12345u64));
        assert_eq!(parse_fr(&json!("0x3039"), "x").unwrap(), Fr::from(12345u64));
        assert_eq!(parse_fr(&json!("0x0000AbCd"), "x").unwrap(), Fr::from(0xabcdu64));
        assert_eq!(parse_fr(&json!(12345), "x").unwrap(), Fr::from(12345u64));
        assert_eq!(parse_fr(&json!(u64::MAX), "x").unwrap(), Fr::from(u64::MAX));
        assert_eq!(parse_fr(&json!("0"), "x").unwrap(), Fr::from(0u64));
    }

    #[test]
    fn padding_is_allowed_up_to_the_modulus_width_and_refused_beyond() {
        let padded = |width: usize| format!("{}7", "0".repeat(width - 1));
        assert_eq!(parse_fr(&json!(padded(78)), "x").unwrap(), Fr::from(7u64));
        assert_eq!(parse_fr(&json!(format!("0x{}", padded(64))), "x").unwrap(), Fr::from(7u64));
        let refused = parse_fr(&json!(padded(7_000_000)), "x").unwrap_err().0;
        assert!(refused.contains("7000000 digits"), "{refused}");
        assert!(parse_fr(&json!(format!("0x{}", padded(65))), "x").is_err());
    }

    #[test]
    fn the_largest_element_parses_and_round_trips() {
        let largest = -Fr::ONE;
        let decimal = fr_to_json(&largest);
        assert_eq!(parse_fr(&decimal, "x").unwrap(), largest);
        let hex = format!("0x{}", hex::encode(largest.into_bigint().to_bytes_be()));
        assert_eq!(parse_fr(&json!(hex), "x").unwrap(), largest);
    }

    #[test]
    fn rejects_the_modulus_and_above() {
        let err = parse_fr(&json!(modulus_decimal()), "inputs.x").unwrap_err();
        assert!(err.0.starts_with("inputs.x: not less than"), "{err}");
        let hex = format!("0x{}", hex::encode(Fr::MODULUS.to_bytes_be()));
        assert!(parse_fr(&json!(hex), "x").unwrap_err().0.contains("modulus"));
        // At the widest form allowed: overflow is caught, not wrapped.
        let err = parse_fr(&json!(format!("0x{}", "f".repeat(64))), "x").unwrap_err();
        assert!(err.0.contains("modulus"), "{err}");
        let err = parse_fr(&json!("9".repeat(78)), "x").unwrap_err();
        assert!(err.0.contains("modulus"), "{err}");
        // Wider: refused by length before any arithmetic.
        let err = parse_fr(&json!("9".repeat(100)), "x").unwrap_err();
        assert!(err.0.contains("100 digits"), "{err}");
    }

    #[test]
    fn rejects_malformed_values_naming_the_field() {
        let cases = [
            (json!("-5"), "negative"),
            (json!(-5), "negative"),
            (json!("12a"), "'a' is not a decimal digit"),
            (json!("0xfg"), "'g' is not a hex digit"),
            (json!(" 1"), "' ' is not a decimal digit"),
            (json!("+1"), "'+' is not a decimal digit"),
            (json!(""), "empty"),
            (json!("0x"), "empty"),
            (json!(1.5), "not an integer"),
            (json!(null), "got null"),
            (json!([1]), "got an array"),
        ];
        for (value, expected) in cases {
            let err = parse_fr(&value, "inputs.leaves[7]").unwrap_err();
            assert!(err.0.starts_with("inputs.leaves[7]"), "{value}: {err}");
            assert!(err.0.contains(expected), "{value}: {err}");
        }
    }

    #[test]
    fn integers_objects_and_arrays() {
        assert_eq!(parse_integer(&json!(7), "p.k", 2..=24).unwrap(), 7);
        for bad in [json!(1), json!(25), json!(-3), json!(7.0), json!("7")] {
            let err = parse_integer(&bad, "p.k", 2..=24).unwrap_err();
            assert!(err.0.starts_with("p.k must be an integer in 2..=24, got"), "{err}");
        }
        let value = json!({"a": 1});
        let object = parse_object(&value, "params", &["a", "b"]).unwrap();
        assert_eq!(required(object, "params", "a").unwrap(), &json!(1));
        assert_eq!(required(object, "params", "b").unwrap_err().0, "params.b is required");
        let err = parse_object(&json!({"c": 1}), "params", &["a", "b"]).unwrap_err();
        assert_eq!(err.0, "params has an unknown key \"c\"; allowed: a, b");
        let err = parse_object(&json!([]), "params", &["a"]).unwrap_err();
        assert_eq!(err.0, "params must be an object, got an array");
        let elements = parse_array(&json!([1, "0x2"]), "xs", 2, parse_fr).unwrap();
        assert_eq!(elements, vec![Fr::from(1u64), Fr::from(2u64)]);
        let err = parse_array(&json!([1]), "xs", 2, parse_fr).unwrap_err();
        assert_eq!(err.0, "xs must have 2 elements, got 1");
        let err = parse_array(&json!([1, "z"]), "xs", 2, parse_fr).unwrap_err();
        assert_eq!(err.0, "xs[1]: 'z' is not a decimal digit");
        let err = parse_array(&json!({}), "xs", 2, parse_fr).unwrap_err();
        assert_eq!(err.0, "xs must be an array, got an object");
    }
}
