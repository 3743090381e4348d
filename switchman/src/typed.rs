//! Typed calls: Rust values in, a Rust value out ([`Reference::call_as`]).
//!
//! Over dubbo:// and Triple's Hessian wrapper the arguments are written as Hessian2 straight
//! from the Rust values and the result is read straight into `R`
//! ([`switchman_hessian::serde`]: the Java mapping of each Rust type), with no JSON in
//! between. The arguments are also kept as JSON on the [`Invocation`] for what reads them
//! there: `arguments[i]` routing rules, consistent hashing, and the protocols that speak JSON.
//! A result that no provider sent (failsafe's and failback's empty answer, a mock) is read
//! from its JSON.
//!
//! The Java parameter types come from the Rust types ([`JavaType`]: `i64` is `long`,
//! `Option<i64>` is `java.lang.Long`, `String` is `java.lang.String`, `Vec<T>` is
//! `java.util.List`, ...); a struct names its Java class with [`java_type!`](crate::java_type),
//! and [`Reference::call_as_with_types`] takes them explicitly where a Rust type cannot tell
//! (an overload on `List` vs `ArrayList`, `byte[]`, unsigned numbers).

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex};

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use switchman_cluster::Strategy;
use switchman_core::{Error, Invocation, Result, TypedBody};

use crate::Reference;

/// The Java type a Rust type stands for as a method parameter (`Class.getName()` form:
/// `long`, `java.lang.String`, `org.example.User`).
pub trait JavaType {
    /// The Java type of a parameter of this Rust type.
    fn java_type() -> Cow<'static, str>;
    /// The boxed Java type, for `Option<Self>` (`int` → `java.lang.Integer`); reference types
    /// are their own box.
    fn java_boxed() -> Cow<'static, str> {
        Self::java_type()
    }
}

macro_rules! primitive {
    ($($t:ty => $java:literal, $boxed:literal;)*) => {$(
        impl JavaType for $t {
            fn java_type() -> Cow<'static, str> {
                Cow::Borrowed($java)
            }
            fn java_boxed() -> Cow<'static, str> {
                Cow::Borrowed($boxed)
            }
        }
    )*};
}

primitive! {
    bool => "boolean", "java.lang.Boolean";
    i8 => "byte", "java.lang.Byte";
    i16 => "short", "java.lang.Short";
    i32 => "int", "java.lang.Integer";
    i64 => "long", "java.lang.Long";
    f32 => "float", "java.lang.Float";
    f64 => "double", "java.lang.Double";
    char => "char", "java.lang.Character";
}

macro_rules! reference {
    ($java:literal: $($t:ty),* $(,)?) => {$(
        impl JavaType for $t {
            fn java_type() -> Cow<'static, str> {
                Cow::Borrowed($java)
            }
        }
    )*};
}

reference!("java.lang.String": String, str);
reference!("java.util.Date": std::time::SystemTime);

impl<T: JavaType + ?Sized> JavaType for &T {
    fn java_type() -> Cow<'static, str> {
        T::java_type()
    }
    fn java_boxed() -> Cow<'static, str> {
        T::java_boxed()
    }
}

impl<T: JavaType> JavaType for Option<T> {
    fn java_type() -> Cow<'static, str> {
        T::java_boxed()
    }
}

impl<T> JavaType for Vec<T> {
    fn java_type() -> Cow<'static, str> {
        Cow::Borrowed("java.util.List")
    }
}

impl<T> JavaType for [T] {
    fn java_type() -> Cow<'static, str> {
        Cow::Borrowed("java.util.List")
    }
}

impl<T> JavaType for VecDeque<T> {
    fn java_type() -> Cow<'static, str> {
        Cow::Borrowed("java.util.List")
    }
}

impl<T, S> JavaType for HashSet<T, S> {
    fn java_type() -> Cow<'static, str> {
        Cow::Borrowed("java.util.Set")
    }
}

impl<T> JavaType for BTreeSet<T> {
    fn java_type() -> Cow<'static, str> {
        Cow::Borrowed("java.util.Set")
    }
}

impl<K, V, S> JavaType for HashMap<K, V, S> {
    fn java_type() -> Cow<'static, str> {
        Cow::Borrowed("java.util.Map")
    }
}

impl<K, V> JavaType for BTreeMap<K, V> {
    fn java_type() -> Cow<'static, str> {
        Cow::Borrowed("java.util.Map")
    }
}

/// Names the Java class of Rust types for [`JavaType`]:
/// `switchman::java_type!(User => "org.example.User", Order => "org.example.Order");`
/// (the class their `#[serde(rename = "...")]` gives them on the wire).
#[macro_export]
macro_rules! java_type {
    ($($t:ty => $java:literal),* $(,)?) => {$(
        impl $crate::JavaType for $t {
            fn java_type() -> ::std::borrow::Cow<'static, str> {
                ::std::borrow::Cow::Borrowed($java)
            }
        }
    )*};
}

/// A Java interface a Rust type stands for: its name, version and group as a Dubbo service.
///
/// `#[switchman::interface]` implements it for `dyn Trait` (and for the generated client), so
/// a reference to the interface starts from the trait alone:
/// [`Reference::new_for::<dyn UserService>()`](crate::Reference::new_for).
///
/// ```compile_fail,E0277
/// // A trait the attribute did not write names no Java interface.
/// trait Plain {}
/// let _ = switchman::Reference::new_for::<dyn Plain>();
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` names no Java interface",
    label = "not a `#[switchman::interface]` trait",
    note = "write `Reference::new_for::<dyn Trait>()` for a trait under `#[switchman::interface(\"org.example.Service\")]`"
)]
pub trait JavaInterface {
    /// The Java interface's name (`org.example.UserService`).
    const INTERFACE: &'static str;
    /// The service version (empty: none).
    const VERSION: &'static str;
    /// The service group (empty: none).
    const GROUP: &'static str;
}

/// The arguments of a typed call: a tuple of values (`()`, `(7_i64,)`, `(a, b)`, ... up to
/// eight), each `Serialize`, written as Hessian2 by its Rust type's Java mapping.
pub trait JavaArgs: Send + Sync + 'static {
    /// How many arguments.
    const LEN: usize;
    /// Their Java types, from the Rust types ([`JavaType`]).
    fn java_types() -> Vec<String>;
    /// Every argument into one Hessian2 stream.
    fn write_joint(
        &self,
        out: &mut Vec<u8>,
    ) -> std::result::Result<(), switchman_hessian::serde::Error>;
    /// Every argument as a stream of its own.
    fn write_each(&self) -> std::result::Result<Vec<Vec<u8>>, switchman_hessian::serde::Error>;
    /// Every argument as JSON.
    fn to_json(&self) -> serde_json::Result<Vec<Value>>;
}

macro_rules! tuple_args {
    ($n:expr; $($t:ident $i:tt),*) => {
        impl<$($t: JavaType + Serialize + Send + Sync + 'static),*> JavaArgs for ($($t,)*) {
            const LEN: usize = $n;
            fn java_types() -> Vec<String> {
                vec![$($t::java_type().into_owned()),*]
            }
            #[allow(unused_variables, unused_mut)]
            fn write_joint(&self, out: &mut Vec<u8>) -> std::result::Result<(), switchman_hessian::serde::Error> {
                let mut ser = switchman_hessian::Serializer::new(out);
                $(ser.write(&self.$i)?;)*
                Ok(())
            }
            fn write_each(&self) -> std::result::Result<Vec<Vec<u8>>, switchman_hessian::serde::Error> {
                Ok(vec![$(switchman_hessian::to_vec(&self.$i)?),*])
            }
            fn to_json(&self) -> serde_json::Result<Vec<Value>> {
                Ok(vec![$(serde_json::to_value(&self.$i)?),*])
            }
        }
    };
}

tuple_args!(0;);
tuple_args!(1; A 0);
tuple_args!(2; A 0, B 1);
tuple_args!(3; A 0, B 1, C 2);
tuple_args!(4; A 0, B 1, C 2, D 3);
tuple_args!(5; A 0, B 1, C 2, D 3, E 4);
tuple_args!(6; A 0, B 1, C 2, D 3, E 4, F 5);
tuple_args!(7; A 0, B 1, C 2, D 3, E 4, F 5, G 6);
tuple_args!(8; A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7);

/// The JSON a typed call's transport returns in place of the result it read: the index of
/// that result in the call's [`TypedCall`].
const TOKEN: &str = "$switchman.typed-result";

/// One typed call's arguments and the results its attempts read.
struct TypedCall<A, R> {
    args: A,
    results: Mutex<Vec<Option<R>>>,
}

fn hessian_error(what: &str, e: switchman_hessian::serde::Error) -> Error {
    Error::bad_config(format!("{what}: {e}"))
}

impl<A: JavaArgs, R: DeserializeOwned + Send + 'static> TypedBody for TypedCall<A, R> {
    fn write_args(&self, out: &mut Vec<u8>) -> Result<()> {
        self.args
            .write_joint(out)
            .map_err(|e| hessian_error("a typed call's arguments", e))
    }

    fn each_arg(&self) -> Result<Vec<Vec<u8>>> {
        self.args
            .write_each()
            .map_err(|e| hessian_error("a typed call's arguments", e))
    }

    fn read_result(&self, bytes: &[u8]) -> Result<(usize, Value)> {
        // A void or null answer is Hessian's null.
        let (value, took) = if bytes.is_empty() {
            (switchman_hessian::from_slice::<R>(b"N"), 0)
        } else {
            let mut de = switchman_hessian::Deserializer::new(bytes);
            let v = de.read::<R>();
            let took = de.position();
            (v, took)
        };
        let value = value.map_err(|e| {
            Error::bad_config(format!(
                "the result does not read as {}: {e}",
                std::any::type_name::<R>()
            ))
        })?;
        let mut results = self.results.lock().unwrap_or_else(|p| p.into_inner());
        results.push(Some(value));
        Ok((took, serde_json::json!({ TOKEN: results.len() - 1 })))
    }
}

impl<A, R: DeserializeOwned> TypedCall<A, R> {
    /// The call's result: the one the transport read, or `R` from the JSON the call answered
    /// with (a mock, failsafe's null, a JSON protocol).
    fn take(&self, answer: Value) -> Result<R> {
        if let Some(i) = answer
            .as_object()
            .filter(|o| o.len() == 1)
            .and_then(|o| o.get(TOKEN))
            .and_then(Value::as_u64)
        {
            let mut results = self.results.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(r) = results.get_mut(i as usize).and_then(Option::take) {
                return Ok(r);
            }
        }
        serde_json::from_value(answer).map_err(|e| {
            Error::bad_config(format!(
                "the answer does not read as {}: {e}",
                std::any::type_name::<R>()
            ))
        })
    }
}

impl Reference {
    /// Calls `method` with typed arguments (a tuple: `(7_i64,)`) and reads the result as `R`;
    /// the Java parameter types come from the Rust types ([`JavaType`]). See the module docs.
    ///
    /// ```no_run
    /// # async fn demo(users: switchman::Reference) -> switchman::Result<()> {
    /// #[derive(serde::Deserialize)]
    /// #[serde(rename = "org.example.User")]
    /// struct User { id: i64, name: String }
    ///
    /// let user: User = users.call_as("getUser", (7_i64,)).await?;
    /// # Ok(()) }
    /// ```
    pub async fn call_as<A: JavaArgs, R: DeserializeOwned + Send + 'static>(
        &self,
        method: &str,
        args: A,
    ) -> Result<R> {
        self.call_as_with_types(method, A::java_types(), args).await
    }

    /// [`Reference::call_as`] with the Java parameter types given (`["long",
    /// "java.util.ArrayList"]`): for what a Rust type cannot tell.
    pub async fn call_as_with_types<A: JavaArgs, R: DeserializeOwned + Send + 'static>(
        &self,
        method: &str,
        types: impl IntoIterator<Item = impl Into<String>>,
        args: A,
    ) -> Result<R> {
        self.call_as_with(method, types, args, &CallContext::new())
            .await
    }
}

/// Per-call settings of a typed call ([`Reference::call_as_with`]): attachments (Dubbo's
/// implicit parameters), among them the per-call `timeout` and `retries` overrides.
///
/// An `#[switchman::interface]` method takes one as its last parameter
/// (`ctx: &switchman::CallContext`); its attachments go over the method's
/// `#[java(timeout = .., retries = ..)]`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CallContext {
    attachments: Vec<(String, String)>,
}

impl CallContext {
    /// No attachments: the reference's settings apply.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds (or replaces) an attachment.
    pub fn attachment(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.set_attachment(key, value);
        self
    }

    /// Adds (or replaces) an attachment.
    pub fn set_attachment(&mut self, key: impl Into<String>, value: impl Into<String>) {
        let (key, value) = (key.into(), value.into());
        match self.attachments.iter_mut().find(|(k, _)| *k == key) {
            Some(slot) => slot.1 = value,
            None => self.attachments.push((key, value)),
        }
    }

    /// This call's timeout (the `timeout` attachment, in whole milliseconds; zero leaves the
    /// reference's timeout).
    pub fn timeout(self, timeout: std::time::Duration) -> Self {
        self.attachment("timeout", timeout.as_millis().to_string())
    }

    /// This call's retries (the `retries` attachment), for failover.
    pub fn retries(self, retries: u32) -> Self {
        self.attachment("retries", retries.to_string())
    }

    /// The attachments, in the order they were first set.
    pub fn attachments(&self) -> &[(String, String)] {
        &self.attachments
    }

    /// These attachments with `other`'s over them.
    pub fn merged(mut self, other: &CallContext) -> Self {
        for (k, v) in &other.attachments {
            self.set_attachment(k.clone(), v.clone());
        }
        self
    }
}

impl Reference {
    /// [`Reference::call_as_with_types`] with per-call attachments ([`CallContext`]: `timeout`,
    /// `retries`, implicit parameters). `JavaArgs::java_types()` of the tuple gives the types
    /// from the Rust types.
    pub async fn call_as_with<A: JavaArgs, R: DeserializeOwned + Send + 'static>(
        &self,
        method: &str,
        types: impl IntoIterator<Item = impl Into<String>>,
        args: A,
        context: &CallContext,
    ) -> Result<R> {
        let types: Vec<String> = types.into_iter().map(Into::into).collect();
        if types.len() != A::LEN {
            return Err(Error::bad_config(format!(
                "{method}: {} parameter types ({}) for {} arguments",
                types.len(),
                types.join(","),
                A::LEN
            )));
        }
        if self.cluster().settings(method).strategy == Strategy::Mergeable {
            return Err(Error::bad_config(format!(
                "{method}: a typed call takes one provider's answer, and mergeable merges the \
                 answers as JSON: call it with Reference::call"
            )));
        }
        let json = args
            .to_json()
            .map_err(|e| Error::bad_config(format!("{method}: an argument as JSON: {e}")))?;
        let call = Arc::new(TypedCall::<A, R> {
            args,
            results: Mutex::new(Vec::new()),
        });
        let mut inv = Invocation::new(method)
            .with_args(json)
            .with_types(types)
            .with_typed(call.clone());
        for (k, v) in &context.attachments {
            inv.set_attachment(k.clone(), v.clone());
        }
        let answer = self.invoke(&inv).await?;
        call.take(answer)
    }
}
