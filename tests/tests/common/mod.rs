//! Helpers for tests that run real peers as processes: finding the tools,
//! free ports, processes stopped by PID on drop, commands with a time limit.
#![allow(dead_code)] // each test binary uses its own subset

use std::io::{BufRead, BufReader, Read};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::thread;
use std::time::{Duration, Instant};

/// Finds a tool, or says why it is missing. With `MCPWIRE_REQUIRE_PEERS=1`
/// (CI) a missing tool fails the test; otherwise the test prints
/// `SKIPPED: <tool> not found` and returns.
macro_rules! require {
    ($found:expr, $tool:expr) => {
        match $found {
            Some(path) => path,
            None => {
                if $crate::common::peers_required() {
                    panic!("{} not found, and MCPWIRE_REQUIRE_PEERS=1", $tool);
                }
                println!("SKIPPED: {} not found", $tool);
                return;
            }
        }
    };
}
pub(crate) use require;

pub fn peers_required() -> bool {
    std::env::var_os("MCPWIRE_REQUIRE_PEERS").is_some_and(|v| v == "1")
}

/// An executable called `name` on PATH.
pub fn on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
}

/// The Python of `MCPWIRE_PYTHON` (a venv with h2 4.4.1), if it imports h2.
pub fn python_with_h2() -> Option<PathBuf> {
    let python = PathBuf::from(std::env::var_os("MCPWIRE_PYTHON")?);
    let ok = Command::new(&python)
        .args(["-c", "import h2.connection"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    ok.then_some(python)
}

/// A script of `tests/peers/`.
pub fn peer_script(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("peers")
        .join(name)
}

/// A fresh, empty scratch folder for one test.
pub fn scratch(test: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("{test}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create scratch folder");
    dir
}

/// A port on 127.0.0.1 that was free a moment ago.
pub fn free_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
    l.local_addr().expect("local address").port()
}

/// Waits until something accepts connections on 127.0.0.1:`port`.
pub fn wait_listening(port: u16, child: &mut Peer) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return;
        }
        if let Ok(Some(status)) = child.child.try_wait() {
            panic!("{} exited with {status} before listening", child.name);
        }
        assert!(
            Instant::now() < deadline,
            "{} does not listen on 127.0.0.1:{port}",
            child.name
        );
        thread::sleep(Duration::from_millis(50));
    }
}

/// The port of a peer started on port 0 with its stdout piped, from the
/// first line it prints (`listening 127.0.0.1:PORT`); the rest of its
/// stdout is read by a thread, so that it never blocks on it.
pub fn listening_port(peer: &mut Peer) -> u16 {
    let stdout = peer.child.stdout.take().expect("piped stdout");
    let mut reader = BufReader::new(stdout);
    let mut line = String::new();
    reader
        .read_line(&mut line)
        .unwrap_or_else(|e| panic!("read the first line of {}: {e}", peer.name));
    let port = line
        .trim()
        .strip_prefix("listening ")
        .and_then(|a| a.rsplit(':').next())
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("unexpected first line from {}: {line:?}", peer.name));
    thread::spawn(move || {
        let _ = std::io::copy(&mut reader, &mut std::io::sink());
    });
    port
}

/// A peer process, killed (by its PID) and reaped on drop.
#[derive(Debug)]
pub struct Peer {
    pub name: String,
    pub child: Child,
}

impl Peer {
    pub fn spawn(name: &str, cmd: &mut Command) -> Self {
        let child = cmd
            .stdin(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {name}: {e}"));
        Self {
            name: name.to_string(),
            child,
        }
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts our `h2-echo-server` on a port it picks, and returns the process
/// and the port (read from its `listening 127.0.0.1:PORT` line).
pub fn our_server(extra: &[&str]) -> (Peer, u16) {
    let mut peer = Peer::spawn(
        "h2-echo-server",
        Command::new(env!("CARGO_BIN_EXE_h2-echo-server"))
            .arg("0")
            .args(extra)
            .stdout(Stdio::piped()),
    );
    let stdout = peer.child.stdout.take().expect("piped stdout");
    let mut line = String::new();
    BufReader::new(stdout)
        .read_line(&mut line)
        .expect("read the server's first line");
    let port = line
        .trim()
        .rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("unexpected first line from h2-echo-server: {line:?}"));
    (peer, port)
}

/// What a finished command gave.
#[derive(Debug)]
pub struct Output {
    pub status: ExitStatus,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
}

impl Output {
    pub fn stdout_text(&self) -> String {
        String::from_utf8_lossy(&self.stdout).into_owned()
    }

    pub fn stderr_text(&self) -> String {
        String::from_utf8_lossy(&self.stderr).into_owned()
    }

    /// Panics with both outputs unless the command exited 0.
    pub fn assert_success(&self, what: &str) {
        assert!(
            self.status.success(),
            "{what}: {}\n--- stdout\n{}\n--- stderr\n{}",
            self.status,
            tail(&self.stdout_text(), 4000),
            tail(&self.stderr_text(), 4000)
        );
    }
}

/// The end of `s`, at most `n` bytes of it.
pub fn tail(s: &str, n: usize) -> &str {
    let mut at = s.len().saturating_sub(n);
    while !s.is_char_boundary(at) {
        at += 1;
    }
    &s[at..]
}

/// Runs `cmd` to the end, killing it after `limit`.
pub fn run(cmd: &mut Command, limit: Duration) -> Output {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("spawn {cmd:?}: {e}"));
    let reader = |r: Option<Box<dyn Read + Send>>| {
        thread::spawn(move || {
            let mut buf = Vec::new();
            if let Some(mut r) = r {
                let _ = r.read_to_end(&mut buf);
            }
            buf
        })
    };
    let out = reader(child.stdout.take().map(|s| Box::new(s) as _));
    let err = reader(child.stderr.take().map(|s| Box::new(s) as _));
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for child") {
            break status;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let status = child.wait().expect("wait for killed child");
            let stdout = out.join().unwrap_or_default();
            let stderr = err.join().unwrap_or_default();
            panic!(
                "{cmd:?} did not finish in {limit:?} ({status})\n--- stdout\n{}\n--- stderr\n{}",
                tail(&String::from_utf8_lossy(&stdout), 4000),
                tail(&String::from_utf8_lossy(&stderr), 4000)
            );
        }
        thread::sleep(Duration::from_millis(20));
    };
    Output {
        status,
        stdout: out.join().unwrap_or_default(),
        stderr: err.join().unwrap_or_default(),
    }
}

/// `n` octets that compress badly and differ at every offset.
pub fn random_body(n: usize) -> Vec<u8> {
    // xorshift64*: no dependency, and a bug that shifts data shows.
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15 ^ n as u64;
    (0..n)
        .map(|_| {
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            (x.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 56) as u8
        })
        .collect()
}
