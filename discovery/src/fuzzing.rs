//! Entry points for the fuzz targets (`fuzz/`) into parsers of registry data that are private
//! to this crate. Not part of the API: hidden, and may change with any release.

/// The Curator JSON of a ZooKeeper application-level node (`/services/{app}/{id}`), as the
/// subscription reads it: the instance's address and its metadata, or why it is skipped.
#[cfg(feature = "zookeeper")]
pub fn curator_instance(app: &str, data: &[u8]) -> Result<crate::metadata::AppInstance, String> {
    crate::zookeeper::app::parse_node(app, data)
}

/// The applications a Nacos interface-to-application mapping config names.
#[cfg(feature = "nacos")]
pub fn nacos_mapping(content: &str) -> std::collections::BTreeSet<String> {
    crate::metadata::nacos::parse_mapping(content)
}

/// A Nacos `instance/list` answer read over the HTTP open API (services too large for
/// nacos-sdk): the instances kept and the hosts dropped, or why the answer is refused.
#[cfg(feature = "nacos")]
pub fn nacos_http_list(body: &[u8]) -> Result<(usize, usize), String> {
    crate::nacos::http_list::parse_list(body, "com.foo.Bar", "DEFAULT_GROUP")
        .map(|l| (l.instances.len(), l.dropped))
}

/// A JAAS file's sections (`sasl.jaas=`): how many, or why it is refused.
#[cfg(feature = "zookeeper")]
pub fn jaas_sections(text: &str) -> Result<usize, String> {
    crate::zookeeper::jaas::jaas_section_count(text)
}
