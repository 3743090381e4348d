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
