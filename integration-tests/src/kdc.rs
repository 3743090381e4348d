//! A private MIT Kerberos KDC for the GSSAPI tests: a realm of its own in a scratch directory,
//! listening on one 127.0.0.1 port (UDP and TCP), with principals and keytabs made by
//! `kadmin.local`. The Debian packages `krb5-kdc` and `krb5-admin-server` provide the programs
//! (`scripts/install-deps` installs them); [`Kdc::start`] says what is missing otherwise.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::ports::allocate;

/// The realm of every test KDC.
pub const REALM: &str = "SWITCHMAN.TEST";

/// A running KDC; killed and its directory removed when dropped.
#[derive(Debug)]
pub struct Kdc {
    dir: PathBuf,
    port: u16,
    child: Child,
}

/// Where Debian puts the KDC's programs (not on a normal user's PATH).
fn program(name: &str) -> Option<PathBuf> {
    ["/usr/sbin", "/usr/bin", "/sbin"]
        .iter()
        .map(|d| Path::new(d).join(name))
        .find(|p| p.is_file())
}

impl Kdc {
    /// Starts a KDC for [`REALM`] with `principals` (random keys). `Err` names what is
    /// missing when the programs are not installed.
    pub fn start(principals: &[&str]) -> Result<Kdc, String> {
        let missing: Vec<&str> = ["krb5kdc", "kdb5_util", "kadmin.local"]
            .into_iter()
            .filter(|p| program(p).is_none())
            .collect();
        if !missing.is_empty() {
            return Err(format!(
                "no {} (Debian: apt-get install krb5-kdc krb5-admin-server; scripts/install-deps does)",
                missing.join(", ")
            ));
        }
        let dir = std::env::temp_dir().join(crate::unique("switchman-kdc"));
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let port = allocate();
        let krb5 = format!(
            "[libdefaults]\n    default_realm = {REALM}\n    dns_lookup_realm = false\n    \
             dns_lookup_kdc = false\n    rdns = false\n    dns_canonicalize_hostname = false\n    \
             udp_preference_limit = 1\n[realms]\n    {REALM} = {{\n        kdc = 127.0.0.1:{port}\n    }}\n"
        );
        let d = dir.display();
        let kdc = format!(
            "[kdcdefaults]\n    kdc_listen = 127.0.0.1:{port}\n    kdc_tcp_listen = 127.0.0.1:{port}\n\
             [realms]\n    {REALM} = {{\n        database_name = {d}/principal\n        \
             key_stash_file = {d}/stash\n        acl_file = {d}/kadm5.acl\n        max_life = 1h\n    }}\n\
             [logging]\n    kdc = FILE:{d}/kdc.log\n"
        );
        std::fs::write(dir.join("krb5.conf"), krb5).map_err(|e| e.to_string())?;
        std::fs::write(dir.join("kdc.conf"), kdc).map_err(|e| e.to_string())?;
        let run = |name: &str, args: &[&str]| -> Result<(), String> {
            let out = Command::new(program(name).expect("checked above"))
                .args(args)
                .env("KRB5_CONFIG", dir.join("krb5.conf"))
                .env("KRB5_KDC_PROFILE", dir.join("kdc.conf"))
                .stdin(Stdio::null())
                .output()
                .map_err(|e| format!("{name}: {e}"))?;
            if out.status.success() {
                Ok(())
            } else {
                Err(format!(
                    "{name} {args:?}: {}{}",
                    String::from_utf8_lossy(&out.stdout),
                    String::from_utf8_lossy(&out.stderr)
                ))
            }
        };
        run(
            "kdb5_util",
            &["create", "-s", "-r", REALM, "-P", "switchman-test-master"],
        )?;
        for p in principals {
            run(
                "kadmin.local",
                &["-r", REALM, "-q", &format!("addprinc -randkey {p}")],
            )?;
        }
        let child = Command::new(program("krb5kdc").expect("checked above"))
            .args(["-n", "-r", REALM])
            .env("KRB5_CONFIG", dir.join("krb5.conf"))
            .env("KRB5_KDC_PROFILE", dir.join("kdc.conf"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("krb5kdc: {e}"))?;
        let kdc = Kdc { dir, port, child };
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            if Instant::now() > deadline {
                return Err(format!(
                    "krb5kdc is not listening on 127.0.0.1:{port} after 10s: {}",
                    std::fs::read_to_string(kdc.dir.join("kdc.log")).unwrap_or_default()
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(kdc)
    }

    /// A keytab with `principal`'s keys, written to the KDC's directory.
    pub fn keytab(&self, principal: &str) -> Result<PathBuf, String> {
        let file = self
            .dir
            .join(format!("{}.keytab", principal.replace(['/', '@'], "_")));
        let out = Command::new(program("kadmin.local").expect("checked at start"))
            .args([
                "-r",
                REALM,
                "-q",
                &format!("ktadd -k {} {principal}", file.display()),
            ])
            .env("KRB5_CONFIG", self.krb5_conf())
            .env("KRB5_KDC_PROFILE", self.dir.join("kdc.conf"))
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("kadmin.local: {e}"))?;
        if out.status.success() && file.is_file() {
            Ok(file)
        } else {
            Err(format!(
                "ktadd {principal}: {}",
                String::from_utf8_lossy(&out.stderr)
            ))
        }
    }

    /// The `krb5.conf` of the realm (for `KRB5_CONFIG` and `-Djava.security.krb5.conf`).
    pub fn krb5_conf(&self) -> PathBuf {
        self.dir.join("krb5.conf")
    }

    /// The KDC's scratch directory (a place for a ticket cache).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The KDC's port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }
}

impl Drop for Kdc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
