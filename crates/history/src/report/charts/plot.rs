//! A small XY plot in hand-written SVG: axes with ticks and units, linear or log scales, lines,
//! markers, min–max whiskers, dashed guides and a legend. Hand-written rather than plotters so
//! the output is one predictable inline <svg> with an id, no fonts or styles from outside.

use std::fmt::Write;

use super::axis::{domain, Map};
pub use super::axis::{min_max, tick_text, Axis, Format, Scale};
use super::esc;
use costlab_core::model::Quality;
use costlab_core::model::ResultRow;

pub const W: f64 = 720.0;
pub const H: f64 = 380.0;
const LEFT: f64 = 78.0;
const RIGHT: f64 = 520.0;
const TOP: f64 = 36.0;
const BOTTOM: f64 = 320.0;

pub const PALETTE: [&str; 10] = [
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf",
    "#7f7f7f", "#bcbd22",
];

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Marker {
    None,
    Circle,
    Square,
    Diamond,
}

/// (x, y, optional (min, max) whisker).
pub type Point = (f64, f64, Option<(f64, f64)>);

#[derive(Debug, Clone)]
pub struct Series {
    pub name: String,
    /// (x, y, optional (min, max) whisker).
    pub points: Vec<Point>,
    pub line: bool,
    pub dashed: bool,
    pub marker: Marker,
    pub color: Option<String>,
    /// Drawn lighter (the second run of `report --against`).
    pub faded: bool,
    /// Listed in the legend (a family of curves may share one entry).
    pub in_legend: bool,
    /// The points whose figure is not ok, by x, with its verdict: drawn with the figure's mark
    /// (a bar hatched), so a chart never shows a disturbed figure as a clean one.
    pub verdicts: Vec<(f64, Quality)>,
}

impl Series {
    pub fn line(name: impl Into<String>, points: Vec<Point>) -> Series {
        Series {
            name: name.into(),
            points,
            line: true,
            dashed: false,
            marker: Marker::Circle,
            color: None,
            faded: false,
            in_legend: true,
            verdicts: Vec::new(),
        }
    }

    /// Note the verdict of the figure drawn at `x` (nothing to note when it is ok or unjudged).
    pub fn judge(&mut self, x: f64, r: &ResultRow) {
        if let Some(q) = r.quality.filter(|q| *q != Quality::Ok) {
            self.verdicts.push((x, q));
        }
    }

    /// The verdict of the point at `x`, when it is not ok.
    pub fn verdict_at(&self, x: f64) -> Option<Quality> {
        self.verdicts
            .iter()
            .filter(|(vx, _)| *vx == x)
            .map(|(_, q)| *q)
            .max()
    }

    /// A legend entry with nothing drawn: says what a line style means.
    pub fn key(name: impl Into<String>, dashed: bool, color: &str) -> Series {
        Series {
            dashed,
            marker: Marker::None,
            color: Some(color.to_string()),
            ..Series::line(name, vec![])
        }
    }
}

/// A point to draw attention to (a significant change between two runs), with a short label.
#[derive(Debug, Clone)]
pub struct Mark {
    pub x: f64,
    pub y: f64,
    pub label: String,
}

/// A vertical guide at x, labelled (cache sizes on a latency chart).
#[derive(Debug, Clone)]
pub struct Guide {
    pub x: f64,
    pub label: String,
}

#[derive(Debug, Clone)]
pub struct Plot {
    pub id: String,
    pub title: String,
    pub x: Axis,
    pub y: Axis,
    pub series: Vec<Series>,
    pub guides: Vec<Guide>,
    /// Rings around points, labelled.
    pub marks: Vec<Mark>,
}

fn marker(out: &mut String, m: Marker, x: f64, y: f64, color: &str) {
    match m {
        Marker::None => {}
        Marker::Circle => {
            let _ = write!(
                out,
                r#"<circle cx="{x:.1}" cy="{y:.1}" r="3.5" fill="{color}"/>"#
            );
        }
        Marker::Square => {
            let _ = write!(
                out,
                r#"<rect x="{:.1}" y="{:.1}" width="7" height="7" fill="{color}"/>"#,
                x - 3.5,
                y - 3.5
            );
        }
        Marker::Diamond => {
            let _ = write!(
                out,
                r##"<path d="M{x:.1} {:.1} L{:.1} {y:.1} L{x:.1} {:.1} L{:.1} {y:.1} Z" fill="{color}" stroke="#000" stroke-width="0.8"/>"##,
                y - 6.0,
                x + 6.0,
                y + 6.0,
                x - 6.0
            );
        }
    }
}

/// The mark of a figure that is not ok, drawn beside its point or above its bar.
fn verdict_mark(o: &mut String, q: Quality, x: f64, y: f64) {
    let color = if q == Quality::Disturbed {
        "#b00020"
    } else {
        "#a66300"
    };
    let _ = write!(
        o,
        r#"<text class="verdict-mark" x="{:.1}" y="{:.1}" font-size="13" font-weight="bold" fill="{color}">{}<title>{}</title></text>"#,
        x + 5.0,
        y - 5.0,
        q.mark(),
        q.word()
    );
}

impl Plot {
    /// Whether any point drawn is marked (its legend then says what the marks mean).
    pub fn has_verdicts(&self) -> bool {
        self.series.iter().any(|s| !s.verdicts.is_empty())
    }

    /// The one x value every point shares, when each series has a single point: there is no
    /// line to draw along x, so the plot is drawn as bars.
    pub fn single_x(&self) -> Option<f64> {
        let drawn: Vec<&Series> = self
            .series
            .iter()
            .filter(|s| !s.points.is_empty())
            .collect();
        if drawn.is_empty() || drawn.iter().any(|s| s.points.len() != 1) {
            return None;
        }
        let x = drawn[0].points[0].0;
        drawn.iter().all(|s| s.points[0].0 == x).then_some(x)
    }

    fn color(&self, i: usize) -> String {
        self.series[i]
            .color
            .clone()
            .unwrap_or_else(|| PALETTE[i % PALETTE.len()].to_string())
    }

    fn open(&self, o: &mut String, kind: &str) {
        let _ = write!(
            o,
            r#"<svg id="{}" class="chart" data-kind="{kind}" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {W} {H}" width="{W}" height="{H}" role="img" aria-label="{}">"#,
            esc(&self.id),
            esc(&self.title)
        );
        let _ = write!(
            o,
            r##"<rect x="0" y="0" width="{W}" height="{H}" fill="#fff"/>"##
        );
        let _ = write!(
            o,
            r#"<text x="{LEFT}" y="22" font-size="15" font-weight="bold">{}</text>"#,
            esc(&self.title)
        );
    }

    fn y_axis(&self, o: &mut String, my: &Map, yt: &[f64]) {
        for t in yt {
            let y = my.at(*t);
            let _ = write!(
                o,
                r##"<line x1="{LEFT}" y1="{y:.1}" x2="{RIGHT}" y2="{y:.1}" stroke="#e5e5e5"/><text x="{:.1}" y="{:.1}" font-size="11" text-anchor="end">{}</text>"##,
                LEFT - 6.0,
                y + 4.0,
                esc(&tick_text(*t, self.y.format))
            );
        }
        let _ = write!(
            o,
            r#"<text x="16" y="{:.1}" font-size="12" text-anchor="middle" transform="rotate(-90 16 {:.1})">{}</text>"#,
            (TOP + BOTTOM) / 2.0,
            (TOP + BOTTOM) / 2.0,
            esc(&self.y.label)
        );
    }

    fn frame(&self, o: &mut String, x_label: &str) {
        let _ = write!(
            o,
            r##"<rect x="{LEFT}" y="{TOP}" width="{:.1}" height="{:.1}" fill="none" stroke="#333"/>"##,
            RIGHT - LEFT,
            BOTTOM - TOP
        );
        let _ = write!(
            o,
            r#"<text x="{:.1}" y="{:.1}" font-size="12" text-anchor="middle">{}</text>"#,
            (LEFT + RIGHT) / 2.0,
            BOTTOM + 38.0,
            esc(x_label)
        );
    }

    fn mark(o: &mut String, x: f64, y: f64, label: &str) {
        let _ = write!(
            o,
            r##"<circle class="mark" cx="{x:.1}" cy="{y:.1}" r="8" fill="none" stroke="#c00" stroke-width="2"/><text x="{:.1}" y="{:.1}" font-size="10" font-weight="bold" fill="#c00">{}</text>"##,
            x + 9.0,
            y - 8.0,
            esc(label)
        );
    }

    pub fn render(&self) -> String {
        if let Some(x) = self.single_x() {
            return self.render_bars(x);
        }
        let mut xs = Vec::new();
        let mut ys = Vec::new();
        for s in &self.series {
            for (x, y, w) in &s.points {
                xs.push(*x);
                ys.push(*y);
                if let Some((a, b)) = w {
                    ys.push(*a);
                    ys.push(*b);
                }
            }
        }
        xs.extend(self.guides.iter().map(|g| g.x));
        if matches!(self.y.scale, Scale::Log(_)) {
            ys.retain(|v| *v > 0.0);
        }
        if matches!(self.x.scale, Scale::Log(_)) {
            xs.retain(|v| *v > 0.0);
        }
        let (x0, x1, xt) = domain(&self.x, &xs);
        let (y0, y1, yt) = domain(&self.y, &ys);
        let mx = Map::new(self.x.scale, x0, x1, LEFT, RIGHT);
        let my = Map::new(self.y.scale, y0, y1, BOTTOM, TOP);
        let mut o = String::new();
        self.open(&mut o, "line");
        for t in &xt {
            let x = mx.at(*t);
            let _ = write!(
                o,
                r##"<line x1="{x:.1}" y1="{TOP}" x2="{x:.1}" y2="{BOTTOM}" stroke="#e5e5e5"/><text class="xtick" x="{x:.1}" y="{:.1}" font-size="11" text-anchor="middle">{}</text>"##,
                BOTTOM + 16.0,
                esc(&tick_text(*t, self.x.format))
            );
        }
        self.y_axis(&mut o, &my, &yt);
        self.frame(&mut o, &self.x.label);
        for g in &self.guides {
            let x = mx.at(g.x);
            let _ = write!(
                o,
                r##"<line x1="{x:.1}" y1="{TOP}" x2="{x:.1}" y2="{BOTTOM}" stroke="#555" stroke-dasharray="4 3"/><text x="{:.1}" y="{:.1}" font-size="11" fill="#333">{}</text>"##,
                x + 3.0,
                TOP + 12.0,
                esc(&g.label)
            );
        }
        let _ = write!(
            o,
            r#"<clipPath id="{}-clip"><rect x="{LEFT}" y="{TOP}" width="{:.1}" height="{:.1}"/></clipPath><g clip-path="url(#{}-clip)">"#,
            esc(&self.id),
            RIGHT - LEFT,
            BOTTOM - TOP,
            esc(&self.id)
        );
        for (i, s) in self.series.iter().enumerate() {
            let color = self.color(i);
            let fade = if s.faded { r#" opacity="0.5""# } else { "" };
            let pts: Vec<Point> = s
                .points
                .iter()
                .filter(|(x, y, _)| x.is_finite() && y.is_finite())
                .map(|(x, y, w)| (mx.at(*x), my.at(*y), w.map(|(a, b)| (my.at(a), my.at(b)))))
                .collect();
            let _ = write!(o, "<g{fade}>");
            if s.line && pts.len() > 1 {
                let d: Vec<String> = pts
                    .iter()
                    .map(|(x, y, _)| format!("{x:.1},{y:.1}"))
                    .collect();
                let _ = write!(
                    o,
                    r#"<polyline points="{}" fill="none" stroke="{color}" stroke-width="2"{}><title>{}</title></polyline>"#,
                    d.join(" "),
                    if s.dashed {
                        r#" stroke-dasharray="6 4""#
                    } else {
                        ""
                    },
                    esc(&s.name)
                );
            }
            let judged: Vec<Option<Quality>> = s
                .points
                .iter()
                .filter(|(x, y, _)| x.is_finite() && y.is_finite())
                .map(|(x, _, _)| s.verdict_at(*x))
                .collect();
            for ((x, y, w), q) in pts.iter().zip(judged) {
                if let Some((a, b)) = w {
                    if (a - b).abs() > 0.5 {
                        let _ = write!(
                            o,
                            r#"<line x1="{x:.1}" y1="{a:.1}" x2="{x:.1}" y2="{b:.1}" stroke="{color}" stroke-width="1.2"/>"#
                        );
                    }
                }
                marker(&mut o, s.marker, *x, *y, &color);
                if let Some(q) = q {
                    verdict_mark(&mut o, q, *x, *y);
                }
            }
            o.push_str("</g>");
        }
        for m in &self.marks {
            Plot::mark(&mut o, mx.at(m.x), my.at(m.y), &m.label);
        }
        o.push_str("</g>");
        self.legend(&mut o, false);
        o.push_str("</svg>");
        o
    }

    /// One bar per series at the single x value, with min–max whiskers and the median
    /// written above; the x value goes into the axis label ("block size (bytes): 256M").
    fn render_bars(&self, x: f64) -> String {
        let drawn: Vec<usize> = (0..self.series.len())
            .filter(|i| !self.series[*i].points.is_empty())
            .collect();
        let mut ys = vec![0.0];
        for i in &drawn {
            let (_, y, w) = self.series[*i].points[0];
            ys.push(y);
            if let Some((a, b)) = w {
                ys.extend([a, b]);
            }
        }
        let y_axis = Axis {
            scale: Scale::Linear,
            zero: true,
            ..self.y.clone()
        };
        let (y0, y1, yt) = domain(&y_axis, &ys);
        let my = Map::new(Scale::Linear, y0, y1, BOTTOM, TOP);
        let mut o = String::new();
        self.open(&mut o, "bar");
        self.y_axis(&mut o, &my, &yt);
        let x_label = format!(
            "{}: {} (one value, one bar per series)",
            self.x.label,
            tick_text(x, self.x.format)
        );
        self.frame(&mut o, &x_label);
        let slot = (RIGHT - LEFT) / drawn.len() as f64;
        let width = (slot * 0.7).min(60.0);
        if self.has_verdicts() {
            // Hatching over a bar whose figure is not ok.
            let _ = write!(
                o,
                r##"<defs><pattern id="{}-hatch" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)"><line x1="0" y1="0" x2="0" y2="6" stroke="#fff" stroke-width="2.5"/></pattern></defs>"##,
                esc(&self.id)
            );
        }
        for (k, i) in drawn.iter().enumerate() {
            let s = &self.series[*i];
            let color = self.color(*i);
            let (_, y, w) = s.points[0];
            let cx = LEFT + slot * (k as f64 + 0.5);
            let top = my.at(y);
            let _ = write!(
                o,
                r#"<rect class="bar" x="{:.1}" y="{top:.1}" width="{width:.1}" height="{:.1}" fill="{color}"{}{}><title>{}</title></rect>"#,
                cx - width / 2.0,
                (BOTTOM - top).max(0.0),
                if s.faded {
                    r#" fill-opacity="0.45""#
                } else {
                    ""
                },
                if s.dashed {
                    r##" stroke="#333" stroke-dasharray="4 3""##
                } else {
                    ""
                },
                esc(&s.name)
            );
            let q = s.verdict_at(x);
            if let Some(q) = q {
                let _ = write!(
                    o,
                    r#"<rect class="bar-{}" x="{:.1}" y="{top:.1}" width="{width:.1}" height="{:.1}" fill="url(#{}-hatch)"><title>{}: {}</title></rect>"#,
                    q.word(),
                    cx - width / 2.0,
                    (BOTTOM - top).max(0.0),
                    esc(&self.id),
                    esc(&s.name),
                    q.word()
                );
            }
            if let Some((a, b)) = w {
                let (a, b) = (my.at(a), my.at(b));
                if (a - b).abs() > 0.5 {
                    let _ = write!(
                        o,
                        r##"<line x1="{cx:.1}" y1="{a:.1}" x2="{cx:.1}" y2="{b:.1}" stroke="#222" stroke-width="1.2"/>"##
                    );
                }
            }
            let _ = write!(
                o,
                r#"<text x="{cx:.1}" y="{:.1}" font-size="10" text-anchor="middle">{}{}</text>"#,
                top - 4.0,
                esc(&tick_text(y, self.y.format)),
                q.map_or("", Quality::mark)
            );
            for m in self.marks.iter().filter(|m| m.y == y) {
                Plot::mark(&mut o, cx, top, &m.label);
            }
        }
        self.legend(&mut o, true);
        o.push_str("</svg>");
        o
    }

    /// The legend right of the frame; rows shrink to fit every entry rather than cut one.
    /// Its keys match the marks: a square swatch for bars, the line and marker otherwise (a
    /// bar chart draws no lines, so an entry that only explains a line style is left out).
    fn legend(&self, o: &mut String, bars: bool) {
        let lx = RIGHT + 16.0;
        let _ = write!(
            o,
            r#"<text x="{lx}" y="{:.1}" font-size="12" font-weight="bold">legend</text>"#,
            TOP + 4.0
        );
        let entries: Vec<usize> = (0..self.series.len())
            .filter(|i| self.series[*i].in_legend)
            .filter(|i| !bars || !self.series[*i].points.is_empty())
            .collect();
        // The last line says what the marks mean, when any point carries one.
        let keyed = self.has_verdicts();
        if keyed {
            let _ = write!(
                o,
                r##"<text class="legend-verdicts" x="{lx}" y="{:.1}" font-size="10" fill="#b00020">! disturbed, ~ noisy: not clean</text>"##,
                H - 6.0
            );
        }
        let room = H - 8.0 - (TOP + 22.0) - if keyed { 14.0 } else { 0.0 };
        let pitch = (room / entries.len().max(1) as f64).clamp(9.0, 17.0);
        let font = if pitch < 13.0 { 9.0 } else { 11.0 };
        let max_chars = if font < 11.0 { 34 } else { 28 };
        for (k, i) in entries.iter().enumerate() {
            let s = &self.series[*i];
            let color = self.color(*i);
            let y = TOP + 22.0 + pitch * k as f64;
            if y > H - 4.0 - if keyed { 14.0 } else { 0.0 } {
                let _ = write!(
                    o,
                    r#"<text x="{lx}" y="{y:.1}" font-size="{font}">… {} more</text>"#,
                    entries.len() - k
                );
                break;
            }
            let fade = if s.faded { r#" opacity="0.5""# } else { "" };
            let _ = write!(o, "<g{fade}>");
            if bars {
                let _ = write!(
                    o,
                    r#"<rect class="legend-swatch" x="{:.1}" y="{:.1}" width="12" height="12" fill="{color}"{}{}/>"#,
                    lx + 5.0,
                    y - 10.0,
                    if s.faded {
                        r#" fill-opacity="0.45""#
                    } else {
                        ""
                    },
                    if s.dashed {
                        r##" stroke="#333" stroke-dasharray="4 3""##
                    } else {
                        ""
                    }
                );
            } else if s.line || s.points.is_empty() {
                let _ = write!(
                    o,
                    r#"<line x1="{lx}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="{color}" stroke-width="2"{}/>"#,
                    y - 4.0,
                    lx + 22.0,
                    y - 4.0,
                    if s.dashed {
                        r#" stroke-dasharray="6 4""#
                    } else {
                        ""
                    }
                );
            }
            if !bars {
                marker(o, s.marker, lx + 11.0, y - 4.0, &color);
            }
            o.push_str("</g>");
            let mut name = s.name.clone();
            if name.chars().count() > max_chars {
                name = name.chars().take(max_chars - 1).collect::<String>() + "…";
            }
            let _ = write!(
                o,
                r#"<text class="legend-entry" x="{:.1}" y="{y:.1}" font-size="{font}">{}</text>"#,
                lx + 28.0,
                esc(&name)
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_round() {
        let a = Axis::new("y", Scale::Linear, Format::Number);
        let (lo, hi, t) = domain(&a, &[3.0, 27.0]);
        assert_eq!((lo, hi), (0.0, 30.0));
        assert_eq!(t, vec![0.0, 5.0, 10.0, 15.0, 20.0, 25.0, 30.0]);
        let b = Axis::new("x", Scale::Log(2.0), Format::Bytes);
        let (_, _, t) = domain(&b, &[4096.0, 1048576.0]);
        assert_eq!(t.first(), Some(&4096.0));
        assert_eq!(t.last(), Some(&1048576.0));
        assert_eq!(tick_text(65536.0, Format::Bytes), "64K");
        assert_eq!(tick_text(2.5, Format::Number), "2.5");
        assert_eq!(tick_text(400000.0, Format::Number), "400k");
        assert_eq!(tick_text(1500000.0, Format::Number), "1.5M");
    }

    #[test]
    fn count_axes_tick_whole_numbers() {
        let a = Axis::count("threads (count)", &[1.0, 2.0]);
        let (_, _, t) = domain(&a, &[1.0, 2.0]);
        assert!(t.iter().all(|v| v.fract() == 0.0), "{t:?}");
        let b = Axis::count("threads (count)", &[1.0, 16.0]);
        assert_eq!(b.scale, Scale::Log(2.0));
        let (_, _, t) = domain(&b, &[1.0, 16.0]);
        assert_eq!(t, vec![1.0, 2.0, 4.0, 8.0, 16.0]);
    }

    #[test]
    fn one_x_value_draws_bars() {
        let p = Plot {
            id: "b".into(),
            title: "t".into(),
            x: Axis::new("block (bytes)", Scale::Log(2.0), Format::Bytes),
            y: Axis::new("bandwidth (GB/s)", Scale::Linear, Format::Number),
            series: vec![
                Series::line("4k", vec![(256.0 * 1048576.0, 10.0, Some((9.0, 11.0)))]),
                Series::line("2m", vec![(256.0 * 1048576.0, 12.0, None)]),
            ],
            guides: vec![],
            marks: vec![],
        };
        assert_eq!(p.single_x(), Some(256.0 * 1048576.0));
        let s = p.render();
        assert_eq!(s.matches("<rect class=\"bar\"").count(), 2);
        // The legend keys are square swatches like the bars, not lines with dots.
        let legend = &s[s.find(">legend<").unwrap()..];
        assert_eq!(legend.matches("class=\"legend-swatch\"").count(), 2);
        assert!(!legend.contains("<line") && !legend.contains("<circle"));
        assert!(s.contains("block (bytes): 256M"));
        assert!(!s.contains("hatch") && !s.contains("legend-verdicts"));
    }

    fn judged(q: Quality) -> ResultRow {
        let mut r = ResultRow::new(
            "mem",
            costlab_core::case! {"block" => 1},
            "latency",
            "ns",
            vec![1.0],
        )
        .unwrap();
        r.quality = Some(q);
        r
    }

    #[test]
    fn a_figure_that_is_not_ok_is_marked_on_its_bar_and_its_point() {
        let x = 256.0 * 1048576.0;
        let mut disturbed = Series::line("4k", vec![(x, 719.0, Some((700.0, 730.0)))]);
        disturbed.judge(x, &judged(Quality::Disturbed));
        let mut clean = Series::line("thp", vec![(x, 406.0, None)]);
        clean.judge(x, &judged(Quality::Ok));
        let mut p = Plot {
            id: "lat".into(),
            title: "t".into(),
            x: Axis::new("block (bytes)", Scale::Log(2.0), Format::Bytes),
            y: Axis::new("latency (ns)", Scale::Linear, Format::Number),
            series: vec![disturbed, clean],
            guides: vec![],
            marks: vec![],
        };
        // One x: bars. The disturbed one is hatched and its median label carries the mark.
        let s = p.render();
        assert_eq!(s.matches("class=\"bar-disturbed\"").count(), 1);
        assert!(s.contains("url(#lat-hatch)"));
        assert!(s.contains(">719!</text>"), "{s}");
        assert!(s.contains(">406</text>"));
        assert!(s.contains("! disturbed, ~ noisy: not clean"));
        // Two x values: a line, with the mark beside the marked point only.
        p.series[0].points.push((2.0 * x, 800.0, None));
        p.series[0].judge(2.0 * x, &judged(Quality::Noisy));
        let s = p.render();
        assert_eq!(s.matches("class=\"verdict-mark\"").count(), 2);
        assert!(s.contains(">~<title>noisy</title>"));
        assert!(s.contains(">!<title>disturbed</title>"));
    }

    #[test]
    fn svg_has_id_axes_and_legend() {
        let p = Plot {
            id: "chart-x".into(),
            title: "t <1>".into(),
            x: Axis::new("conns", Scale::Linear, Format::Number),
            y: Axis::new("req/s", Scale::Linear, Format::Number),
            series: vec![Series::line(
                "epoll",
                vec![(1.0, 2.0, Some((1.5, 2.5))), (2.0, 3.0, None)],
            )],
            guides: vec![],
            marks: vec![],
        };
        let s = p.render();
        assert!(s.starts_with(r#"<svg id="chart-x""#));
        assert!(s.contains("t &lt;1&gt;") && s.contains("epoll") && s.contains("legend"));
        assert!(s.ends_with("</svg>"));
    }
}
