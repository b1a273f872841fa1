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
