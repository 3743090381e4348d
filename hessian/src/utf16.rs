//! Hessian counts a string's length in UTF-16 units (Java's chars) and writes each unit as
//! UTF-8 on its own, a surrogate pair as two 3-byte sequences: joining the units back into a
//! Rust string, shared by the `Value` decoder and the serde deserializer.

/// Appends `unit` (read at offset `at`) to `s`; a high surrogate waits in `high` for the low
/// one that must follow it. An unpaired surrogate is an error: (what, its offset).
pub(crate) fn push_unit(
    s: &mut String,
    high: &mut Option<(u16, usize)>,
    unit: u16,
    at: usize,
) -> Result<(), (&'static str, usize)> {
    match (high.take(), unit) {
        (Some((h, _)), 0xdc00..=0xdfff) => {
            let c = 0x10000 + ((u32::from(h) - 0xd800) << 10) + (u32::from(unit) - 0xdc00);
            // Always a valid scalar value: 0x10000..=0x10ffff.
            s.push(char::from_u32(c).unwrap_or(char::REPLACEMENT_CHARACTER));
        }
        (Some((_, h_at)), _) => return Err(("unpaired high surrogate", h_at)),
        (None, 0xd800..=0xdbff) => *high = Some((unit, at)),
        (None, 0xdc00..=0xdfff) => return Err(("unpaired low surrogate", at)),
        (None, u) => s.push(char::from_u32(u32::from(u)).unwrap_or(char::REPLACEMENT_CHARACTER)),
    }
    Ok(())
}
