//! The writer's chain under write failures.

use super::*;

fn line(n: u32) -> Pending {
    format!("{{\"n\":{n}}}\n").into_bytes().into()
}

/// Records lost to a failed write take no place in the chain: the next record written
/// continues from the last one in the file, and the file verifies.
#[cfg(target_os = "linux")]
#[test]
fn a_failed_write_leaves_the_chain_at_the_last_record_in_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.jsonl");
    let node = Arc::new(std::sync::OnceLock::new());
    let mut sink = Sink::new(path.clone(), Some(open_file(&path).unwrap()), node, None);
    assert_eq!(sink.write(&[line(1)], true, false).written, 1);
    // A disk that refuses every byte.
    let full = OpenOptions::new().append(true).open("/dev/full").unwrap();
    sink.file = Some((full, None));
    let failed = sink.write(&[line(2), line(3)], false, false);
    assert_eq!((failed.written, failed.lost), (0, 2));
    // The next batch opens the path again and continues the chain.
    assert_eq!(sink.write(&[line(4)], true, false).written, 1);
    let report = super::super::verify::verify_files(std::slice::from_ref(&path), None);
    assert_eq!(report.status, super::super::verify::Status::Intact, "{}", report.render());
    assert_eq!(report.records, 2);
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.lines().nth(1).unwrap().contains("\"event.sequence\":2,\"event.previous_hash\""));
}
