//! The structure of the stream, as `Hessian2Output` writes it: lengths, list and map
//! starts and ends, type names, class definitions and instances, enum constants and
//! `BigDecimal`s (the scalar writes are [`JavaOut`](crate::encode::JavaOut)'s, shared with
//! the [`Encoder`](crate::Encoder)).

use std::sync::Arc;

use super::{Fields, Serializer};
use crate::bignum;
use crate::encode::Flush;
use crate::serde::error::{Error, Result};
use crate::tag::*;

impl Serializer<'_> {
    pub(super) fn write_len(&mut self, len: usize) -> Result<()> {
        let n = i32::try_from(len).map_err(|_| Error::new(format!("length {len} over 2^31")))?;
        self.out.write_int(n);
        Ok(())
    }

    pub(super) fn write_type(&mut self, t: &'static str) {
        self.out.flush_if(Flush::Lt32);
        if let Some(i) = self.types.iter().position(|&x| x == t) {
            self.out.write_int(i32::try_from(i).unwrap_or(i32::MAX));
        } else {
            self.types.push(t);
            self.out.write_str(t);
        }
    }

    /// A list's start: fixed (`len` known) or variable, typed or not.
    pub(super) fn list_begin(
        &mut self,
        len: Option<usize>,
        class: Option<&'static str>,
    ) -> Result<()> {
        self.out.flush_if(Flush::Lt32);
        self.refs += 1;
        match (len, class) {
            (Some(n), None) if n <= LIST_DIRECT_MAX => {
                self.out.put(&[BC_LIST_DIRECT_UNTYPED + n as u8])
            }
            (Some(n), Some(c)) if n <= LIST_DIRECT_MAX => {
                self.out.put(&[BC_LIST_DIRECT + n as u8]);
                self.write_type(c);
            }
            (Some(n), None) => {
                self.out.put(&[BC_LIST_FIXED_UNTYPED]);
                self.write_len(n)?;
            }
            (Some(n), Some(c)) => {
                self.out.put(&[BC_LIST_FIXED]);
                self.write_type(c);
                self.write_len(n)?;
            }
            (None, None) => self.out.put(&[BC_LIST_VARIABLE_UNTYPED]),
            (None, Some(c)) => {
                self.out.put(&[BC_LIST_VARIABLE]);
                self.write_type(c);
            }
        }
        Ok(())
    }

    pub(super) fn map_begin(&mut self) {
        self.out.flush_if(Flush::Lt32);
        self.refs += 1;
        self.out.put(&[BC_MAP_UNTYPED]);
    }

    pub(super) fn end(&mut self) {
        self.out.flush_if(Flush::Lt32);
        self.out.put(&[BC_END]);
    }

    /// The index of the class `name` with exactly `fields`, its definition written if new.
    pub(super) fn class_of(&mut self, name: &'static str, fields: &[&'static str]) -> usize {
        if let Some(i) = self
            .classes
            .iter()
            .position(|(n, f)| *n == name && **f == *fields)
        {
            return i;
        }
        self.define(name, Arc::from(fields))
    }

    pub(super) fn define(&mut self, name: &'static str, fields: Fields) -> usize {
        self.out.flush_if(Flush::Lt32);
        self.out.put(&[BC_CLASS_DEF]);
        self.out.write_str(name);
        self.out.write_int(fields.len() as i32);
        for f in fields.iter() {
            self.out.write_str(f);
        }
        self.classes.push((name, fields));
        self.classes.len() - 1
    }

    /// An instance's start (after its class definition).
    pub(super) fn instance(&mut self, class: usize) {
        self.out.flush_if(Flush::Lt32);
        self.refs += 1;
        if class <= OBJECT_DIRECT_MAX {
            self.out.put(&[BC_OBJECT_DIRECT + class as u8]);
        } else {
            self.out.put(&[BC_OBJECT]);
            self.out.write_int(i32::try_from(class).unwrap_or(i32::MAX));
        }
    }

    pub(super) fn write_enum(&mut self, class: &'static str, name: &'static str) {
        if let Some(&(_, _, r)) = self
            .enums
            .iter()
            .find(|(c, n, _)| *c == class && *n == name)
        {
            return self.out.write_ref(r);
        }
        let r = self.refs;
        let c = self.class_of(class, &["name"]);
        self.instance(c);
        self.out.write_str(name);
        self.enums.push((class, name, r));
    }

    pub(super) fn write_big_decimal(&mut self, text: &str) -> Result<()> {
        let canonical = bignum::canonical_decimal(text)
            .ok_or_else(|| Error::new(format!("{text:?} is not a java.math.BigDecimal")))?;
        let c = self.class_of("java.math.BigDecimal", &["value"]);
        self.instance(c);
        self.out.write_str(&canonical);
        Ok(())
    }
}
