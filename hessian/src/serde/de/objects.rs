//! What the stream shares and objects: class definitions and type names, an object read as a
//! map of its fields (or, in the JSON form, as `{"class", fields}`, a `BigDecimal`'s or an
//! enum's one value, a `BigInteger`'s decimal text, a Throwable's `message` and `cause`).

use ::serde::de::{self, Deserialize, DeserializeSeed, IntoDeserializer, Visitor};

use super::{Class, Deserializer, Mode};
use crate::bignum;
use crate::serde::error::{Error, Result};
use crate::tag::*;

impl<'de> Deserializer<'de> {
    // ----- what the stream shares ---------------------------------------------------------

    pub(super) fn class_def(&mut self, at: usize) -> Result<()> {
        if self.replaying == 0 && self.classes.len() >= self.limits.max_classes {
            return Err(Error::at(
                format!(
                    "more than {} class definitions (max_classes)",
                    self.limits.max_classes
                ),
                at,
            ));
        }
        let name = self.name()?;
        let len = self.read_len()?;
        let mut fields = Vec::with_capacity(len.min(256));
        for _ in 0..len {
            fields.push(self.name()?);
        }
        if self.replaying == 0 {
            let cause = fields.iter().position(|f| f == "cause");
            self.classes.push(Class {
                name,
                fields,
                cause,
                positional: None,
            });
        }
        Ok(())
    }

    /// A list's or map's type: a name (counted) or a reference to one seen before.
    pub(super) fn skip_type(&mut self) -> Result<()> {
        let at = self.pos;
        let tag = self.byte()?;
        match tag {
            0x00..=0x1f | 0x30..=0x33 | BC_STRING_CHUNK | BC_STRING => {
                self.string_after(tag, at)?;
                if self.replaying == 0 {
                    if self.types >= self.limits.max_classes {
                        return Err(Error::at(
                            format!(
                                "more than {} type names (max_classes)",
                                self.limits.max_classes
                            ),
                            at,
                        ));
                    }
                    self.types += 1;
                }
                Ok(())
            }
            0x80..=0xd7 | BC_INT => {
                let i = self.int_after(tag, at)?;
                if usize::try_from(i).is_ok_and(|i| i < self.types) {
                    Ok(())
                } else {
                    Err(Error::at(
                        format!("type reference {i} out of range ({} types)", self.types),
                        at,
                    ))
                }
            }
            other => Err(Error::at(
                format!("expected a type name, found tag 0x{other:02x}"),
                at,
            )),
        }
    }

    pub(super) fn object<V: Visitor<'de>>(
        &mut self,
        class: usize,
        at: usize,
        visitor: V,
        mode: Mode,
    ) -> Result<V::Value> {
        let Some(def) = self.classes.get(class) else {
            return Err(Error::at(
                format!(
                    "class reference {class} out of range ({} definitions)",
                    self.classes.len()
                ),
                at,
            ));
        };
        let len = def.fields.len();
        let kind = if mode == Mode::Json {
            Kind::of(def)
        } else {
            Kind::Plain
        };
        if mode == Mode::Json {
            let names = def.name.len() + def.fields.iter().map(|f| f.len()).sum::<usize>();
            self.charge(0, names, at)?;
        }
        let opened = self.open(at)?;
        self.check_len(len, self.remaining(), at)?;
        let v = match kind {
            Kind::OneValue => {
                // BigDecimal, UUID, File, an enum: the one field is the value.
                let v = de::Deserializer::deserialize_any(&mut *self, visitor)?;
                self.close(opened);
                return Ok(v);
            }
            Kind::BigInteger => {
                let text = self.big_integer(class, at)?;
                self.close(opened);
                return visitor.visit_string(text);
            }
            Kind::Plain | Kind::Throwable => {
                let mut access = ObjectAccess {
                    de: self,
                    class,
                    next: 0,
                    len,
                    at,
                    class_key: mode == Mode::Json,
                    json: mode == Mode::Json,
                    throwable: kind == Kind::Throwable,
                };
                let v = visitor.visit_map(&mut access)?;
                let next = access.next;
                for _ in next..len {
                    de::IgnoredAny::deserialize(&mut *self)?;
                }
                v
            }
        };
        self.close(opened);
        Ok(v)
    }

    /// An object read into a Rust struct whose (serde) field names are `fields`. When they
    /// are the class's field names in the class's order (the struct declares its fields in
    /// the order the writer sends them, as hessian-lite's bytes and this crate's own do), the
    /// values go to the struct's visitor by position (`visit_seq`): no field name is matched
    /// per object. Otherwise, as a map of the fields by name.
    #[inline]
    pub(super) fn struct_object<V: Visitor<'de>>(
        &mut self,
        class: usize,
        at: usize,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value> {
        let Some(def) = self.classes.get_mut(class) else {
            return self.object(class, at, visitor, Mode::Raw);
        };
        let key = (fields.as_ptr() as usize, fields.len());
        let in_order = match def.positional {
            Some((k, same)) if k == key => same,
            _ => {
                let same = def.fields.len() == fields.len()
                    && def.fields.iter().zip(fields).all(|(a, b)| a == b);
                def.positional = Some((key, same));
                same
            }
        };
        if !in_order {
            return self.object(class, at, visitor, Mode::Raw);
        }
        let (len, cause) = (def.fields.len(), def.cause);
        let opened = self.open(at)?;
        self.check_len(len, self.remaining(), at)?;
        let mut access = FieldSeq {
            de: self,
            next: 0,
            len,
            cause,
            at,
        };
        let v = visitor.visit_seq(&mut access)?;
        if access.next != len {
            // A derived struct with aliases lists them among its fields: it takes fewer
            // values than it names. By name, the class's fields would be duplicates.
            return Err(Error::at(
                format!(
                    "{} of the {len} fields of {} read by position: the struct's field names \
                     (aliases included) match the class's, but it takes fewer values",
                    access.next, self.classes[class].name
                ),
                at,
            ));
        }
        self.close(opened);
        Ok(v)
    }

    /// One field's value of the object at `at`. A Throwable without a cause refers to itself
    /// in its `cause` field (`is_cause`): that reads as null.
    #[inline]
    fn field<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
        is_cause: bool,
        at: usize,
    ) -> Result<T::Value> {
        if is_cause && self.self_ref(at)? {
            return seed.deserialize(().into_deserializer());
        }
        seed.deserialize(&mut *self)
    }

    /// A `java.math.BigInteger`'s decimal text from its fields `signum` and `mag`.
    pub(super) fn big_integer(&mut self, class: usize, at: usize) -> Result<String> {
        let mut signum = 0i64;
        let mut mag: Vec<i64> = Vec::new();
        for i in 0..self.classes[class].fields.len() {
            match &*self.classes[class].fields[i] {
                "signum" => signum = i64::deserialize(&mut *self)?,
                "mag" => mag = Vec::deserialize(&mut *self)?,
                _ => {
                    de::IgnoredAny::deserialize(&mut *self)?;
                }
            }
        }
        let cost = (mag.len() as u64).pow(2);
        if mag.len() > bignum::MAX_WORDS || cost > self.bignum_work {
            return Err(Error::at(
                "a java.math.BigInteger too long to render as decimal",
                at,
            ));
        }
        self.bignum_work -= cost;
        let words: Vec<u32> = mag.iter().map(|&w| w as u32).collect();
        let digits = bignum::to_decimal(&words);
        Ok(if signum < 0 && digits != "0" {
            format!("-{digits}")
        } else {
            digits
        })
    }
}

/// How `deserialize_any` shows an object (this crate's JSON mapping).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    Plain,
    /// `java.math.BigDecimal`, `java.util.UUID`, `java.io.File` (`value`), an enum (`name`).
    OneValue,
    BigInteger,
    Throwable,
}

impl Kind {
    fn of(def: &Class<'_>) -> Kind {
        let has = |f: &str| def.fields.iter().any(|x| x == f);
        match (&*def.name, def.fields.as_slice()) {
            ("java.math.BigDecimal" | "java.util.UUID" | "java.io.File", [f]) if f == "value" => {
                Kind::OneValue
            }
            ("java.math.BigInteger", _) if has("signum") && has("mag") => Kind::BigInteger,
            _ if has("detailMessage") || (has("stackTrace") && has("cause")) => Kind::Throwable,
            (_, [f]) if f == "name" => Kind::OneValue,
            _ => Kind::Plain,
        }
    }
}

/// The fields of a Throwable left out of its JSON form.
const THROWABLE_SKIPPED: [&str; 2] = ["stackTrace", "suppressedExceptions"];

pub(super) struct ObjectAccess<'a, 'de> {
    de: &'a mut Deserializer<'de>,
    class: usize,
    next: usize,
    len: usize,
    at: usize,
    /// A `"class"` member to give first (JSON form).
    class_key: bool,
    /// The JSON form.
    json: bool,
    /// The JSON form of a Throwable: `message`, `cause`, no stack trace.
    throwable: bool,
}

impl<'de> de::MapAccess<'de> for ObjectAccess<'_, 'de> {
    type Error = Error;

    #[inline]
    fn next_key_seed<K: DeserializeSeed<'de>>(&mut self, seed: K) -> Result<Option<K::Value>> {
        if self.class_key {
            return seed.deserialize("class".into_deserializer()).map(Some);
        }
        loop {
            if self.next >= self.len {
                return Ok(None);
            }
            let name = &*self.de.classes[self.class].fields[self.next];
            if self.throwable {
                if THROWABLE_SKIPPED.contains(&name) {
                    self.next += 1;
                    de::IgnoredAny::deserialize(&mut *self.de)?;
                    continue;
                }
                if name == "detailMessage" {
                    return seed.deserialize("message".into_deserializer()).map(Some);
                }
            }
            // A Java field named `class` would clash with the JSON form's member.
            if self.json && name == "class" {
                self.next += 1;
                de::IgnoredAny::deserialize(&mut *self.de)?;
                continue;
            }
            let key: de::value::StrDeserializer<'_, Error> = name.into_deserializer();
            return seed.deserialize(key).map(Some);
        }
    }

    #[inline]
    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value> {
        if self.class_key {
            self.class_key = false;
            let name: de::value::StrDeserializer<'_, Error> =
                (&*self.de.classes[self.class].name).into_deserializer();
            return seed.deserialize(name);
        }
        let is_cause = self
            .de
            .classes
            .get(self.class)
            .is_some_and(|c| c.cause == Some(self.next));
        self.next += 1;
        self.de.field(seed, is_cause, self.at)
    }
}

/// The fields of an object read by position ([`Deserializer::struct_object`]).
struct FieldSeq<'a, 'de> {
    de: &'a mut Deserializer<'de>,
    next: usize,
    len: usize,
    /// The index of the class's field named `cause`.
    cause: Option<usize>,
    at: usize,
}

impl<'de> de::SeqAccess<'de> for FieldSeq<'_, 'de> {
    type Error = Error;

    #[inline]
    fn next_element_seed<T: DeserializeSeed<'de>>(&mut self, seed: T) -> Result<Option<T::Value>> {
        if self.next >= self.len {
            return Ok(None);
        }
        let is_cause = self.cause == Some(self.next);
        self.next += 1;
        self.de.field(seed, is_cause, self.at).map(Some)
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.len - self.next)
    }
}
