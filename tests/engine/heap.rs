//! The cache weighs a compiled robots.txt by `RobotsTxt::heap_size`: these tests count what
//! parsing really allocates (and keeps) on the test's own thread, with a counting global
//! allocator in this test binary (it counts nothing for the other tests), and hold the weight
//! to it (issue 22: the weight said 1.1 KiB per `wide` entry where the heap held more).

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use robots_proxy::robots::RobotsTxt;

/// The system allocator, counting the bytes live that the current thread allocated while
/// counting is on.
struct Counting;

thread_local! {
    static COUNTING: Cell<bool> = const { Cell::new(false) };
    static LIVE: Cell<isize> = const { Cell::new(0) };
}

fn count(delta: isize) {
    // `try_with`: a thread being torn down has no locals left; it is not counting then.
    let _ = COUNTING.try_with(|on| {
        if on.get() {
            let _ = LIVE.try_with(|live| live.set(live.get() + delta));
        }
    });
}

// SAFETY: every call is passed on to the system allocator unchanged; only counted.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count(layout.size() as isize);
        // SAFETY: the caller's contract, passed on.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        count(-(layout.size() as isize));
        // SAFETY: the caller's contract, passed on.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count(new_size as isize - layout.size() as isize);
        // SAFETY: the caller's contract, passed on.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// What `parse` of `body` keeps on the heap, in bytes, with the value itself (as the cache
/// keeps it, in an `Arc`'s allocation).
fn kept_by_parse(body: &[u8]) -> (usize, RobotsTxt) {
    COUNTING.with(|on| on.set(true));
    LIVE.with(|live| live.set(0));
    let robots = RobotsTxt::parse(body);
    let kept = LIVE.with(Cell::get);
    COUNTING.with(|on| on.set(false));
    (usize::try_from(kept).unwrap_or(0) + std::mem::size_of::<RobotsTxt>(), robots)
}

const FILES: &[&str] = &[
    // The `wide` benchmark's file.
    "User-agent: *\nDisallow: /private/\nDisallow: /only-127.0.3.4/\n",
    "User-agent: *\nDisallow: /\n",
    "# a comment\nUser-agent: FooBot\nUser-agent: BarBot\nDisallow: /x\nAllow: /x/y$\n\n\
     User-agent: *\nDisallow: /*.php\nDisallow: /search?q=\nCrawl-delay: 2\n\
     Sitemap: https://example.com/sitemap.xml\n",
    "User-agent: *\nDisallow: /caf%C3%A9/\nDisallow: /a%2fb\nAllow: /\n",
];

#[test]
fn the_weight_is_at_least_what_parsing_keeps_and_not_far_above() {
    for body in FILES {
        let (kept, robots) = kept_by_parse(body.as_bytes());
        let weight = robots.heap_size();
        eprintln!("keeps {kept} B, weighed {weight} B: {body:?}");
        assert!(weight >= kept, "weighed {weight} B, keeps {kept} B: {body:?}");
        assert!(weight <= kept + kept / 4, "weighed {weight} B, keeps only {kept} B: {body:?}");
    }
}

#[test]
fn a_small_file_keeps_little() {
    // Three lines: what the cache holds per authority for most sites (issue 22, `wide`).
    let (kept, _robots) = kept_by_parse(FILES[0].as_bytes());
    assert!(kept <= 1024, "a three-line robots.txt keeps {kept} B");
}
