//! The report opened in headless Chromium: a screenshot that is not blank, with the charts'
//! colours on it, and every chart's <svg> in the page. Fails (does not skip) without chromium.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn chromium() -> PathBuf {
    for name in ["chromium", "chromium-browser", "google-chrome"] {
        for dir in ["/usr/bin", "/usr/local/bin", "/snap/bin"] {
            let p = Path::new(dir).join(name);
            if p.is_file() {
                return p;
            }
        }
    }
    panic!(
        "headless Chromium is needed for the report's browser check and is not installed: \
         run `apt-get install -y chromium` (Debian; as root) or `.ci/run`, which installs it"
    );
}

/// Run chromium with a time limit: a browser that hangs must not hang the tests.
pub(crate) fn screenshot(page: &Path, png: &Path, profile: &Path) {
    let mut child = Command::new(chromium())
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--hide-scrollbars",
            "--no-first-run",
            "--force-device-scale-factor=1",
            "--window-size=1600,2600",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg(format!("--screenshot={}", png.display()))
        .arg(format!("file://{}", page.display()))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("chromium starts");
    let t = Instant::now();
    loop {
        if let Some(status) = child.try_wait().expect("waiting for chromium") {
            assert!(status.success(), "chromium exited with {status}");
            return;
        }
        if t.elapsed() > Duration::from_secs(90) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("chromium took over 90 s to take a screenshot");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The page's DOM as headless Chromium built it (`--dump-dom`), with a time limit.
fn dom(page: &Path, profile: &Path) -> String {
    let child = Command::new(chromium())
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--no-first-run",
            "--dump-dom",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg(format!("file://{}", page.display()))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("chromium starts");
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(Duration::from_secs(90)) {
        Ok(out) => {
            let out = out.expect("waiting for chromium");
            assert!(out.status.success(), "chromium exited with {}", out.status);
            String::from_utf8(out.stdout).expect("the DOM is UTF-8")
        }
        Err(_) => {
            // SAFETY: kill(2) on the pid of the child this test started, which has not been
            // reaped (its waiter is still blocked on it).
            unsafe { libc::kill(pid as i32, libc::SIGKILL) };
            panic!("chromium took over 90 s to dump the DOM");
        }
    }
}

/// Decoded RGB pixels of a PNG, with its size.
pub(crate) fn pixels(png: &Path) -> (u32, u32, Vec<[u8; 3]>) {
    let file = std::fs::File::open(png).expect("screenshot written");
    let mut decoder = png::Decoder::new(std::io::BufReader::new(file));
    decoder.set_transformations(png::Transformations::normalize_to_color8());
    let mut reader = decoder.read_info().expect("a PNG");
    let mut buf = vec![0; reader.output_buffer_size().expect("sized")];
    let info = reader.next_frame(&mut buf).expect("a frame");
    let channels = info.color_type.samples();
    let px = buf[..info.buffer_size()]
        .chunks(channels)
        .map(|c| match channels {
            1 | 2 => [c[0], c[0], c[0]],
            _ => [c[0], c[1], c[2]],
        })
        .collect();
    (info.width, info.height, px)
}

#[test]
fn the_fixture_report_renders_in_headless_chromium() {
    let dir = tempfile::tempdir().unwrap();
    let doc = common::fixture();
    let page = costlab_history::report::html::write_report(
        &dir.path().join("report"),
        &doc,
        &common::fixture_sheet(&doc),
        costlab::registry::charts(&doc),
    )
    .unwrap();
    let html = std::fs::read_to_string(&page).unwrap();
    for id in common::CHART_IDS {
        assert!(html.contains(&format!("<svg id=\"{id}\"")), "no svg {id}");
    }
    let png = dir.path().join("shot.png");
    screenshot(&page, &png, &dir.path().join("profile"));
    if let Ok(keep) = std::env::var("COSTLAB_KEEP_SCREENSHOT") {
        let _ = std::fs::copy(&png, keep);
    }
    let (w, h, px) = pixels(&png);
    assert_eq!((w, h), (1600, 2600));
    // Not blank: far from one flat colour.
    let lum: Vec<f64> = px
        .iter()
        .map(|p| 0.299 * f64::from(p[0]) + 0.587 * f64::from(p[1]) + 0.114 * f64::from(p[2]))
        .collect();
    let mean = lum.iter().sum::<f64>() / lum.len() as f64;
    let var = lum.iter().map(|l| (l - mean).powi(2)).sum::<f64>() / lum.len() as f64;
    assert!(
        var > 100.0,
        "screenshot looks blank (luminance variance {var:.1})"
    );
    let dark = lum.iter().filter(|l| **l < 128.0).count();
    assert!(
        dark > 10_000,
        "too little text or ink on the page ({dark} dark pixels)"
    );
    // The charts were drawn: their first two series colours are on the screen.
    let near = |c: [u8; 3]| {
        px.iter()
            .filter(|p| p.iter().zip(c).all(|(a, b)| a.abs_diff(b) < 12))
            .count()
    };
    let blue = near([0x1f, 0x77, 0xb4]);
    let red = near([0xd6, 0x27, 0x28]);
    assert!(
        blue > 500 && red > 500,
        "chart lines missing: {blue} blue, {red} red pixels"
    );
}

/// The report of a run of one lab, as `costlab syscall --quick` leaves it: no card for the
/// labs that did not run (one line names them), and the page still renders, not blank.
#[test]
fn a_one_lab_report_renders_without_cards_for_labs_that_did_not_run() {
    let dir = tempfile::tempdir().unwrap();
    let mut doc = common::fixture();
    doc.results.retain(|r| r.lab == "syscall");
    doc.models.retain(|m| m.lab == "syscall");
    let page = costlab_history::report::html::write_report(
        &dir.path().join("report"),
        &doc,
        &[],
        costlab::registry::charts(&doc),
    )
    .unwrap();
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(
        !html.contains("Not drawn"),
        "cards for labs that did not run"
    );
    assert!(html.contains("id=\"not-run\">Not run: mem, echo, share, gc.</p>"));
    let png = dir.path().join("shot.png");
    screenshot(&page, &png, &dir.path().join("profile"));
    if let Ok(keep) = std::env::var("COSTLAB_KEEP_ONE_LAB_SCREENSHOT") {
        let _ = std::fs::copy(&png, keep);
    }
    let (w, h, px) = pixels(&png);
    assert_eq!((w, h), (1600, 2600));
    let lum: Vec<f64> = px
        .iter()
        .map(|p| 0.299 * f64::from(p[0]) + 0.587 * f64::from(p[1]) + 0.114 * f64::from(p[2]))
        .collect();
    let mean = lum.iter().sum::<f64>() / lum.len() as f64;
    let var = lum.iter().map(|l| (l - mean).powi(2)).sum::<f64>() / lum.len() as f64;
    assert!(
        var > 20.0,
        "screenshot looks blank (luminance variance {var:.1})"
    );
    let dark = lum.iter().filter(|l| **l < 128.0).count();
    assert!(
        dark > 2_000,
        "too little text on the page ({dark} dark pixels)"
    );
}

/// The report agrees with its sheet, as a browser shows it: a chart card never says a run has
/// no figures of a kind the sheet beside it shows (the mem lab's bandwidth rows carry the
/// kernel's ISA and store kind, which the chart once took for a kind it does not draw), and a
/// figure not read for its spread gives its reason once, in the quality column.
#[test]
fn the_report_agrees_with_its_sheet_and_says_a_reason_once() {
    let dir = tempfile::tempdir().unwrap();
    let mut doc = common::fixture();
    for r in doc.results.iter_mut() {
        if r.lab == "mem" && r.metric == "bandwidth" && r.case.len() == 5 {
            let store = if r.key("op") == "read" {
                "none"
            } else {
                "temporal"
            };
            r.case.insert("isa".into(), "avx2".into());
            r.case.insert("store".into(), store.into());
        }
    }
    let mut sheet = common::fixture_sheet(&doc);
    let reason = "MAD is 15.5% of the median, above the 5% that bandwidth allows";
    let h = &mut sheet[0].headlines[0];
    h.quality = Some(costlab_core::model::Quality::Noisy);
    h.quality_reasons = vec![reason.into()];
    costlab_history::report::verdict::follow(&mut sheet[0].headlines, &[]);
    let page = costlab_history::report::html::write_report(
        &dir.path().join("report"),
        &doc,
        &sheet,
        costlab::registry::charts(&doc),
    )
    .unwrap();
    let html = dom(&page, &dir.path().join("profile"));
    assert!(
        html.contains("seq read bandwidth"),
        "the sheet shows the figure"
    );
    assert!(
        html.contains("<svg id=\"chart-mem-bandwidth-seq\""),
        "the sequential bandwidth chart is drawn"
    );
    for card in html.split("Not drawn: ").skip(1) {
        let card = &card[..card.find("</p>").unwrap_or(card.len())];
        assert!(
            !card.contains("bandwidth figures in this run"),
            "a card says there are no bandwidth figures beside a sheet that shows one: {card}"
        );
    }
    assert_eq!(
        html.matches(reason).count(),
        1,
        "the reason is printed once"
    );
    assert!(html.contains("not read; more samples or a quieter machine would resolve it"));
}
