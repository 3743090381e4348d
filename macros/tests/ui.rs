//! Misuse of `#[switchman::interface]` is a compile error at the user's tokens.

#[test]
fn misuse_is_a_compile_error_at_the_offending_tokens() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/*.rs");
}
