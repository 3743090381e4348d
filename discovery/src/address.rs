//! Pieces of `host[:port]` strings, as registries and rules write them.

/// The host of `host[:port]`, `[v6][:port]` or a bare IPv6 address, without brackets.
pub(crate) fn host_of(addr: &str) -> &str {
    if let Some(rest) = addr.strip_prefix('[') {
        return rest.split(']').next().unwrap_or(rest);
    }
    match addr.rsplit_once(':') {
        Some((h, _)) if !h.contains(':') => h,
        _ => addr,
    }
}

#[cfg(test)]
mod tests {
    use super::host_of;

    #[test]
    fn hosts_of_every_form() {
        for (addr, host) in [
            ("zk1.example:2181", "zk1.example"),
            ("10.0.0.1", "10.0.0.1"),
            ("[::1]:2181", "::1"),
            ("[fe80::1]", "fe80::1"),
            ("::1", "::1"),
            ("", ""),
            ("[", ""),
        ] {
            assert_eq!(host_of(addr), host, "{addr}");
        }
    }
}
