//! Service-key matching cases.

use serde_json::{Value, json};

use super::*;

// ---------------------------------------------------------------------------------------------
// servicekey

pub(super) fn gen_servicekey(g: &mut Gen) -> (String, Value) {
    let flavor = g.pick(&["ismatch", "ismatch", "nacos"]);
    let (cg, cg_shape) = g.pick(&[
        ("", "empty"),
        ("a", "exact"),
        ("b", "exact"),
        ("*", "star"),
        ("a,b", "list"),
        ("b,c", "list"),
        ("a, b", "list"),
        ("a,", "list"),
    ]);
    let (cv, cv_shape) = g.pick(&[
        ("", "empty"),
        ("1.0", "exact"),
        ("2.0", "exact"),
        ("*", "star"),
        ("1.0,2.0", "list"),
        ("2.0,3.0", "list"),
    ]);
    let pg = g.pick(&["", "a", "b", "c", ""]);
    let pv = g.pick(&["", "1.0", "2.0", ""]);
    if cg.contains(", ") {
        g.feat("list-with-space");
    }
    if cg_shape == "list" && cg.split(',').filter(|x| !x.trim().is_empty()).count() < 2 {
        g.feat("list-single-entry");
    }
    if cv_shape == "list" {
        g.feat("version-list");
    }
    if cg_shape == "list" && pg.is_empty() {
        g.feat("group-list-vs-empty-group");
    }
    let (ci, pi) = match g.rng.u32(0..12) {
        // The Nacos registry subscribes to every service for "*" (an admin's view), which
        // NacosServiceName alone does not model.
        0 if flavor != "nacos" => {
            g.feat("interface-star");
            ("*", SERVICE)
        }
        1 => {
            g.feat("interface-mismatch");
            (SERVICE, "com.foo.Other")
        }
        _ => (SERVICE, SERVICE),
    };
    let body = json!({
        "flavor": flavor,
        "consumer": {"interface": ci, "group": cg, "version": cv},
        "provider": {"interface": pi, "group": pg, "version": pv},
    });
    (
        format!("{flavor}/group-{cg_shape}/version-{cv_shape}"),
        body,
    )
}
