//! Certificates the TLS tests make (rcgen): a CA, leaves for 127.0.0.1 and localhost signed by
//! it, and PEM files written to a test's scratch directory. Shared by `java_tls`,
//! `nacos_tls` and `zookeeper_tls`.

use std::io::Write;
use std::path::Path;

/// Writes `text` to `path`.
pub fn write(path: &Path, text: &str) {
    std::fs::File::create(path)
        .and_then(|mut f| f.write_all(text.as_bytes()))
        .unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
}

/// A self-signed CA named `name`: its certificate and the issuer that signs leaves.
pub fn ca(name: &str) -> (rcgen::Certificate, rcgen::Issuer<'static, rcgen::KeyPair>) {
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, name);
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = params.self_signed(&key).unwrap();
    (cert, rcgen::Issuer::new(params, key))
}

/// A leaf for 127.0.0.1 and localhost signed by `issuer`: the certificate and its key.
pub fn leaf_pair(
    issuer: &rcgen::Issuer<'static, rcgen::KeyPair>,
) -> (rcgen::Certificate, rcgen::KeyPair) {
    let params =
        rcgen::CertificateParams::new(vec!["127.0.0.1".to_string(), "localhost".to_string()])
            .unwrap();
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = params.signed_by(&key, issuer).unwrap();
    (cert, key)
}

/// [`leaf_pair`] as PEM: (certificate, PKCS#8 key).
pub fn leaf(issuer: &rcgen::Issuer<'static, rcgen::KeyPair>) -> (String, String) {
    let (cert, key) = leaf_pair(issuer);
    (cert.pem(), key.serialize_pem())
}
