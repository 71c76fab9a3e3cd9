//! Bodies are streamed, never collected: a 100 MiB download passes with flat memory.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use futures_util::StreamExt;

use super::support::Origin;

/// The proxy binary, started on an ephemeral port; stopped on drop.
struct ProxyProcess {
    child: Child,
    addr: String,
    _state: tempfile::TempDir,
}

impl ProxyProcess {
    fn start() -> ProxyProcess {
        let state = tempfile::tempdir().unwrap();
        let mut child = Command::new(env!("CARGO_BIN_EXE_robots-proxy"))
            .args(["serve", "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0"])
            .env("ROBOTS_PROXY_STATE_DIR", state.path())
            // The origin runs on 127.0.0.1, which the destination guard prohibits by default.
            .env("ROBOTS_PROXY_ACCESS__ALLOW_DESTINATIONS", "127.0.0.0/8")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stderr = child.stderr.take().unwrap();
        let mut lines = BufReader::new(stderr).lines();
        let addr = loop {
            let line = lines.next().expect("proxy exited before listening").unwrap();
            if let Some(addr) = line.split("listening on ").nth(1) {
                break addr.trim().to_owned();
            }
        };
        // Keep draining stderr so the child never blocks on a full pipe.
        std::thread::spawn(move || for _ in lines {});
        ProxyProcess { child, addr, _state: state }
    }

    /// Peak resident memory of the process, in KiB (VmHWM).
    fn peak_rss_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap()
    }
}

impl Drop for ProxyProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hundred_mib_download_with_flat_memory() {
    let origin = Origin::start("User-agent: *\nDisallow: /private\n").await;
    let proxy = ProxyProcess::start();
    let client = super::support::reqwest_builder()
        .proxy(reqwest::Proxy::all(format!("http://{}", proxy.addr)).unwrap())
        .timeout(Duration::from_secs(120))
        .build()
        .unwrap();
    // Warm up, so the baseline includes the runtime, pools and the robots cache.
    let warm = client.get(format!("{}/big/1024", origin.base())).send().await.unwrap();
    assert_eq!(warm.bytes().await.unwrap().len(), 1024);
    let before = proxy.peak_rss_kib();

    const TOTAL: u64 = 100 * 1024 * 1024;
    const DOWNLOADS: usize = 4;
    let mut peaks = Vec::new();
    for _ in 0..DOWNLOADS {
        let resp = client.get(format!("{}/big/{TOTAL}", origin.base())).send().await.unwrap();
        assert_eq!(resp.status(), 200);
        let mut stream = resp.bytes_stream();
        let mut received = 0u64;
        while let Some(chunk) = stream.next().await {
            received += chunk.unwrap().len() as u64;
        }
        assert_eq!(received, TOTAL);
        peaks.push(proxy.peak_rss_kib());
    }
    eprintln!("peak RSS before {before} KiB, after each 100 MiB download {peaks:?} KiB");
    // Collecting the body would add 100 MiB; streaming adds buffers the allocator keeps.
    assert!(
        peaks[0].saturating_sub(before) < 40 * 1024,
        "peak RSS grew from {before} KiB to {} KiB while streaming 100 MiB",
        peaks[0]
    );
    // And 300 MiB more add far less than one body: memory is flat, not proportional.
    // (Each download may run on another worker thread, whose malloc arena keeps its own
    // buffers, so a few MiB per thread are expected; a collected body would add 100 MiB.)
    let later = peaks[DOWNLOADS - 1].saturating_sub(peaks[0]);
    assert!(
        later < 32 * 1024,
        "peak RSS kept growing: {} KiB after the first 100 MiB, {} KiB after {} MiB",
        peaks[0],
        peaks[DOWNLOADS - 1],
        DOWNLOADS * 100
    );
}
