//! `#[switchman::interface]`: a typed Dubbo client from a Rust trait. Use it through the
//! `switchman` crate (`switchman::interface`, documented there); the code it writes names
//! `::switchman`.

use proc_macro::TokenStream;
use proc_macro2::{Span, TokenStream as TokenStream2};
use quote::{format_ident, quote, quote_spanned};
use syn::parse::{Parse, ParseStream};
use syn::punctuated::Punctuated;
use syn::spanned::Spanned;
use syn::{
    Attribute, Expr, ExprLit, FnArg, GenericArgument, Ident, ItemTrait, Lit, LitInt, LitStr, Meta,
    PathArguments, ReturnType, Token, TraitItem, TraitItemFn, Type,
};

/// A typed Dubbo client from a Rust trait.
///
/// ```ignore
/// #[switchman::interface("org.example.UserService", version = "1.0.0")]
/// pub trait UserService {
///     async fn get_user(&self, id: i64) -> switchman::Result<User>;          // getUser(long)
///     #[java(name = "save", types = ["org.example.User"], timeout = 500, retries = 0)]
///     async fn save_user(&self, user: &User) -> switchman::Result<bool>;
///     async fn find(&self, name: String, ctx: &switchman::CallContext) -> switchman::Result<Vec<User>>;
/// }
/// ```
///
/// The attribute takes the Java interface's name, then optionally `version = ".."` and
/// `group = ".."`. It writes:
///
/// - the trait, each `async fn` as `fn .. -> impl Future<Output = ..> + Send` (an implementation
///   may still write `async fn`; the futures can be spawned);
/// - `UserServiceClient` (the trait's name + `Client`, the trait's visibility): a
///   `switchman::Reference` that implements the trait. `UserServiceClient::builder()` is
///   `Reference::new(INTERFACE)` with the version and group of the attribute;
///   `UserServiceClient::connect(builder).await?` connects it; `UserServiceClient::new(reference)`
///   wraps a connected one; `INTERFACE`, `VERSION` and `GROUP` are constants on it;
/// - `switchman::JavaInterface` for `dyn UserService` (and the client), so that
///   `switchman::Reference::new_for::<dyn UserService>()` is the same builder, and
///   `<dyn UserService>::connect(builder).await?` (an inherent function of `dyn UserService`)
///   connects it into a `UserServiceClient`. Each method has `where Self: Sized`, which keeps
///   `dyn UserService` a type (the futures the methods return make the trait otherwise not
///   dyn compatible); an implementation need not repeat it.
///
/// Each method calls `Reference::call_as_with(java_name, java_types, (args..), &ctx)`:
///
/// - the Java name is the method's in camelCase (`get_user` → `getUser`), or `#[java(name = "..")]`;
/// - the Java parameter types are `<T as switchman::JavaType>::java_type()` of each parameter's
///   type, or `#[java(types = ["long", "org.example.User"])]` (overloads, concrete classes);
/// - a `&T` argument is sent as `ToOwned::to_owned(arg)` (`&str` → `String`, `&User` → a
///   clone), so it must be `Clone`; owned arguments move;
/// - `#[java(timeout = 500, retries = 0)]` (milliseconds; a count) are the call's `timeout` and
///   `retries` attachments; a last parameter of type `CallContext` or `&CallContext` is not sent
///   as an argument: its attachments go over those;
/// - the return type is `Result<R>` (`switchman::Result<R>`, or a `Result<R, E>` with
///   `E: From<switchman::Error>`); `R` is read from the answer.
///
/// Misuse is a compile error at the user's tokens: a method that is not `async fn`, one
/// without `&self`, a return type that is not a `Result<..>`, an unknown `#[java(..)]` key,
/// `types` of the wrong length, generics, default bodies, items other than methods.
#[proc_macro_attribute]
pub fn interface(attr: TokenStream, item: TokenStream) -> TokenStream {
    let args = match syn::parse::<InterfaceArgs>(attr) {
        Ok(a) => a,
        Err(e) => return e.to_compile_error().into(),
    };
    let item = match syn::parse::<ItemTrait>(item) {
        Ok(i) => i,
        Err(e) => return e.to_compile_error().into(),
    };
    match expand(args, item) {
        Ok(tokens) => tokens.into(),
        Err(e) => e.to_compile_error().into(),
    }
}

/// `"org.example.UserService", version = "1.0.0", group = "g"`.
struct InterfaceArgs {
    interface: LitStr,
    version: Option<LitStr>,
    group: Option<LitStr>,
}

impl Parse for InterfaceArgs {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        if input.is_empty() {
            return Err(syn::Error::new(
                Span::call_site(),
                "#[switchman::interface(\"org.example.Service\")]: the Java interface's name is required",
            ));
        }
        let interface: LitStr = input.parse()?;
        if interface.value().trim().is_empty() {
            return Err(syn::Error::new_spanned(
                &interface,
                "the Java interface's name is empty",
            ));
        }
        let mut out = InterfaceArgs {
            interface,
            version: None,
            group: None,
        };
        while !input.is_empty() {
            input.parse::<Token![,]>()?;
            if input.is_empty() {
                break;
            }
            let key: Ident = input.parse()?;
            input.parse::<Token![=]>()?;
            let value: LitStr = input.parse()?;
            let slot = match key.to_string().as_str() {
                "version" => &mut out.version,
                "group" => &mut out.group,
                _ => {
                    return Err(syn::Error::new_spanned(
                        &key,
                        format!("unknown key `{key}`: the interface takes `version` and `group`"),
                    ));
                }
            };
            if slot.is_some() {
                return Err(syn::Error::new_spanned(
                    &key,
                    format!("`{key}` given twice"),
                ));
            }
            *slot = Some(value);
        }
        Ok(out)
    }
}

/// One method's `#[java(..)]`.
#[derive(Default)]
struct JavaAttr {
    name: Option<LitStr>,
    types: Option<(Vec<LitStr>, TokenStream2)>,
    timeout: Option<LitInt>,
    retries: Option<LitInt>,
}

fn string(expr: &Expr) -> syn::Result<LitStr> {
    match expr {
        Expr::Lit(ExprLit {
            lit: Lit::Str(s), ..
        }) => Ok(s.clone()),
        other => Err(syn::Error::new_spanned(other, "expected a string literal")),
    }
}

fn integer(expr: &Expr) -> syn::Result<LitInt> {
    match expr {
        Expr::Lit(ExprLit {
            lit: Lit::Int(n), ..
        }) if n.base10_parse::<u64>().is_ok() => Ok(n.clone()),
        other => Err(syn::Error::new_spanned(
            other,
            "expected a non-negative integer literal",
        )),
    }
}

/// Reads and removes the `#[java(..)]` attributes of a method.
fn java_attr(attrs: &mut Vec<Attribute>) -> syn::Result<JavaAttr> {
    let mut out = JavaAttr::default();
    let mut error: Option<syn::Error> = None;
    let mut push = |e: syn::Error| match &mut error {
        Some(all) => all.combine(e),
        None => error = Some(e),
    };
    for attr in attrs.iter().filter(|a| a.path().is_ident("java")) {
        let list = match &attr.meta {
            Meta::List(list) => list,
            other => {
                push(syn::Error::new_spanned(
                    other,
                    "expected #[java(name = \"..\", types = [..], timeout = .., retries = ..)]",
                ));
                continue;
            }
        };
        let metas = match list
            .parse_args_with(Punctuated::<syn::MetaNameValue, Token![,]>::parse_terminated)
        {
            Ok(m) => m,
            Err(e) => {
                push(e);
                continue;
            }
        };
        for nv in metas {
            let key = nv
                .path
                .get_ident()
                .map(Ident::to_string)
                .unwrap_or_default();
            let result = match key.as_str() {
                "name" => string(&nv.value).map(|s| out.name = Some(s)),
                "timeout" => integer(&nv.value).map(|n| out.timeout = Some(n)),
                "retries" => integer(&nv.value).map(|n| out.retries = Some(n)),
                "types" => match &nv.value {
                    Expr::Array(a) => a
                        .elems
                        .iter()
                        .map(string)
                        .collect::<syn::Result<Vec<_>>>()
                        .map(|t| out.types = Some((t, quote!(#a)))),
                    other => Err(syn::Error::new_spanned(
                        other,
                        "expected a list of Java types: [\"long\", \"org.example.User\"]",
                    )),
                },
                _ => Err(syn::Error::new_spanned(
                    &nv.path,
                    "unknown #[java] key: expected `name`, `types`, `timeout` or `retries`",
                )),
            };
            if let Err(e) = result {
                push(e);
            }
        }
    }
    attrs.retain(|a| !a.path().is_ident("java"));
    match error {
        Some(e) => Err(e),
        None => Ok(out),
    }
}

/// `get_user` → `getUser` (the Java method's name by default).
fn camel_case(rust: &str) -> String {
    let rust = rust.strip_prefix("r#").unwrap_or(rust);
    let mut out = String::new();
    for part in rust.split('_').filter(|p| !p.is_empty()) {
        if out.is_empty() {
            out.push_str(part);
        } else {
            let mut chars = part.chars();
            if let Some(first) = chars.next() {
                out.extend(first.to_uppercase());
                out.push_str(chars.as_str());
            }
        }
    }
    out
}

/// `R` of a `Result<R>` / `Result<R, E>` return type, and that type.
fn result_type(sig: &syn::Signature) -> syn::Result<(Type, Type)> {
    let ty = match &sig.output {
        ReturnType::Type(_, ty) => ty,
        ReturnType::Default => {
            return Err(syn::Error::new_spanned(
                sig,
                "an interface method returns a `switchman::Result<T>`",
            ));
        }
    };
    let not_result =
        || syn::Error::new_spanned(ty, "an interface method returns a `switchman::Result<T>`");
    let Type::Path(path) = &**ty else {
        return Err(not_result());
    };
    let Some(last) = path.path.segments.last() else {
        return Err(not_result());
    };
    if last.ident != "Result" {
        return Err(not_result());
    }
    let PathArguments::AngleBracketed(args) = &last.arguments else {
        return Err(not_result());
    };
    match args.args.first() {
        Some(GenericArgument::Type(t)) => Ok((t.clone(), (**ty).clone())),
        _ => Err(not_result()),
    }
}

/// Whether a parameter's type is `CallContext` or `&CallContext` (any path to it).
fn is_context(ty: &Type) -> bool {
    let ty = match ty {
        Type::Reference(r) if r.mutability.is_none() => &*r.elem,
        t => t,
    };
    matches!(ty, Type::Path(p) if p.qself.is_none()
        && p.path.segments.last().is_some_and(|s| s.ident == "CallContext" && s.arguments.is_none()))
}

/// One method of the client.
fn method(item: &mut TraitItemFn) -> syn::Result<(TokenStream2, TokenStream2)> {
    let java = java_attr(&mut item.attrs)?;
    let sig = &item.sig;
    if let Some(body) = &item.default {
        return Err(syn::Error::new_spanned(
            body,
            "an interface method has no body: the client calls the provider",
        ));
    }
    if sig.asyncness.is_none() {
        return Err(syn::Error::new_spanned(
            sig,
            "an interface method is an `async fn`",
        ));
    }
    if !sig.generics.params.is_empty() || sig.generics.where_clause.is_some() {
        return Err(syn::Error::new_spanned(
            &sig.generics,
            "an interface method has no generic parameters",
        ));
    }
    if let Some(v) = &sig.variadic {
        return Err(syn::Error::new_spanned(
            v,
            "an interface method is not variadic",
        ));
    }
    match sig.inputs.first() {
        Some(FnArg::Receiver(r)) if r.reference.is_some() && r.mutability.is_none() => {}
        Some(FnArg::Receiver(r)) => {
            return Err(syn::Error::new_spanned(
                r,
                "an interface method takes `&self`",
            ));
        }
        _ => {
            return Err(syn::Error::new_spanned(
                sig,
                "an interface method takes `&self` first",
            ));
        }
    }
    let (ok, output) = result_type(sig)?;

    // The parameters after `&self`: the arguments, and an optional last context.
    let mut params: Vec<(Ident, Type)> = Vec::new();
    for (i, input) in sig.inputs.iter().skip(1).enumerate() {
        let FnArg::Typed(pt) = input else {
            return Err(syn::Error::new_spanned(input, "`self` comes first"));
        };
        if let Type::ImplTrait(t) = &*pt.ty {
            return Err(syn::Error::new_spanned(
                t,
                "an interface method's parameters have concrete types",
            ));
        }
        params.push((format_ident!("__switchman_arg{}", i), (*pt.ty).clone()));
    }
    let context = match params.last() {
        Some((_, ty)) if is_context(ty) => params.pop(),
        _ => None,
    };
    if let Some(i) = params.iter().position(|(_, ty)| is_context(ty)) {
        return Err(syn::Error::new_spanned(
            &params[i].1,
            "the `CallContext` is an interface method's last parameter",
        ));
    }

    let name = &sig.ident;
    let java_name = match &java.name {
        Some(n) => n.value(),
        None => camel_case(&name.to_string()),
    };
    let n = params.len();
    let types = match &java.types {
        Some((types, tokens)) => {
            if types.len() != n {
                return Err(syn::Error::new_spanned(
                    tokens,
                    format!(
                        "{} Java type{} for {n} parameter{}",
                        types.len(),
                        if types.len() == 1 { "" } else { "s" },
                        if n == 1 { "" } else { "s" }
                    ),
                ));
            }
            quote!([#(::std::string::String::from(#types)),*])
        }
        None => {
            let tys = params.iter().map(|(_, ty)| ty);
            quote!([#(<#tys as ::switchman::JavaType>::java_type().into_owned()),*])
        }
    };
    let values = params.iter().map(|(id, ty)| match ty {
        Type::Reference(_) => quote_spanned!(ty.span()=> ::std::borrow::ToOwned::to_owned(#id)),
        _ => quote!(#id),
    });
    let mut settings = Vec::new();
    if let Some(t) = &java.timeout {
        let t = t.base10_digits();
        settings.push(quote!(.attachment("timeout", #t)));
    }
    if let Some(r) = &java.retries {
        let r = r.base10_digits();
        settings.push(quote!(.attachment("retries", #r)));
    }
    let context_param = context.as_ref().map(|(id, ty)| quote!(, #id: #ty));
    // The declaration keeps the user's parameter names.
    let declared = sig.inputs.iter().skip(1);
    let merge = context.as_ref().map(|(id, ty)| match ty {
        Type::Reference(_) => quote!(.merged(#id)),
        _ => quote!(.merged(&#id)),
    });
    let arg_params = params.iter().map(|(id, ty)| quote!(#id: #ty));
    let attrs = &item.attrs;

    let declaration = quote! {
        #(#attrs)*
        fn #name(&self, #(#declared),*)
            -> impl ::core::future::Future<Output = #output> + ::core::marker::Send
        where
            Self: ::core::marker::Sized;
    };
    let implementation = quote! {
        fn #name(&self, #(#arg_params),* #context_param)
            -> impl ::core::future::Future<Output = #output> + ::core::marker::Send
        {
            async move {
                let types: [::std::string::String; #n] = #types;
                let context = ::switchman::CallContext::new() #(#settings)* #merge;
                self.reference
                    .call_as_with::<_, #ok>(#java_name, types, (#(#values,)*), &context)
                    .await
                    .map_err(::core::convert::Into::into)
            }
        }
    };
    Ok((declaration, implementation))
}

fn expand(args: InterfaceArgs, mut item: ItemTrait) -> syn::Result<TokenStream2> {
    if !item.generics.params.is_empty() || item.generics.where_clause.is_some() {
        return Err(syn::Error::new_spanned(
            &item.generics,
            "an interface trait has no generic parameters",
        ));
    }
    if let Some(colon) = &item.colon_token {
        let supertraits = &item.supertraits;
        return Err(syn::Error::new_spanned(
            quote!(#colon #supertraits),
            "an interface trait has no supertraits",
        ));
    }
    if let Some(u) = &item.unsafety {
        return Err(syn::Error::new_spanned(
            u,
            "an interface trait is not unsafe",
        ));
    }
    let mut declarations = Vec::new();
    let mut implementations = Vec::new();
    let mut error: Option<syn::Error> = None;
    for trait_item in &mut item.items {
        let result = match trait_item {
            TraitItem::Fn(f) => method(f),
            other => Err(syn::Error::new_spanned(
                &*other,
                "an interface trait has only `async fn` methods",
            )),
        };
        match result {
            Ok((d, i)) => {
                declarations.push(d);
                implementations.push(i);
            }
            Err(e) => match &mut error {
                Some(all) => all.combine(e),
                None => error = Some(e),
            },
        }
    }
    if let Some(e) = error {
        return Err(e);
    }

    let vis = &item.vis;
    let attrs = &item.attrs;
    let name = &item.ident;
    let client = format_ident!("{}Client", name);
    let interface = &args.interface;
    let version = args
        .version
        .unwrap_or_else(|| LitStr::new("", Span::call_site()));
    let group = args
        .group
        .unwrap_or_else(|| LitStr::new("", Span::call_site()));
    let doc = format!(
        "The Dubbo client of [`{name}`]: calls `{}` through a `switchman::Reference` \
         (written by `#[switchman::interface]`).",
        interface.value()
    );
    let connect_doc = format!(
        "Connects `builder` (from `switchman::Reference::new_for::<dyn {name}>()`) and wraps \
         the reference in a [`{client}`]: `<dyn {name}>::connect(builder).await?`."
    );
    Ok(quote! {
        #(#attrs)*
        #vis trait #name {
            #(#declarations)*
        }

        #[doc = #doc]
        #[derive(Debug, Clone)]
        #vis struct #client {
            reference: ::switchman::Reference,
        }

        impl #client {
            /// The Java interface.
            pub const INTERFACE: &'static str = #interface;
            /// The service version (empty: none).
            pub const VERSION: &'static str = #version;
            /// The service group (empty: none).
            pub const GROUP: &'static str = #group;

            /// A reference builder for the interface, its version and group: add the registry
            /// (and what else it needs) and [`Self::connect`] it.
            pub fn builder() -> ::switchman::ReferenceBuilder {
                ::switchman::Reference::new(Self::INTERFACE)
                    .version(Self::VERSION)
                    .group(Self::GROUP)
            }

            /// Connects `builder` (from [`Self::builder`]) and wraps the reference.
            pub async fn connect(builder: ::switchman::ReferenceBuilder) -> ::switchman::Result<Self> {
                ::core::result::Result::Ok(Self::new(builder.connect().await?))
            }

            /// Wraps a connected reference to the interface.
            pub fn new(reference: ::switchman::Reference) -> Self {
                Self { reference }
            }

            /// The reference the client calls through.
            pub fn reference(&self) -> &::switchman::Reference {
                &self.reference
            }
        }

        impl #name for #client {
            #(#implementations)*
        }

        impl ::switchman::JavaInterface for #client {
            const INTERFACE: &'static str = #interface;
            const VERSION: &'static str = #version;
            const GROUP: &'static str = #group;
        }

        impl ::switchman::JavaInterface for dyn #name {
            const INTERFACE: &'static str = #interface;
            const VERSION: &'static str = #version;
            const GROUP: &'static str = #group;
        }

        impl dyn #name {
            #[doc = #connect_doc]
            pub async fn connect(
                builder: ::switchman::ReferenceBuilder,
            ) -> ::switchman::Result<#client> {
                #client::connect(builder).await
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::camel_case;

    #[test]
    fn snake_case_is_camel_case_in_java() {
        assert_eq!(camel_case("get_user"), "getUser");
        assert_eq!(camel_case("say_hello_to_all"), "sayHelloToAll");
        assert_eq!(camel_case("ping"), "ping");
        assert_eq!(camel_case("r#type"), "type");
        assert_eq!(camel_case("get_http2_url"), "getHttp2Url");
        assert_eq!(camel_case("_private"), "private");
    }
}
