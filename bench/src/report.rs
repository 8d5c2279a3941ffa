//! The report: a Markdown table with the servers side by side and the
//! ratio of the first to the second, and one `BENCH` line per figure for
//! scripts.

use std::fmt::Write as _;

/// How a figure is printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    PerSecond,
    Micros,
    Bytes,
}

/// One figure of one scenario, a value per server.
#[derive(Debug, Clone)]
pub struct Row {
    /// The scenario as a reader sees it.
    pub scenario: String,
    /// The scenario as a script sees it (`echo_c256_k1`).
    pub key: String,
    /// The figure as a reader sees it.
    pub label: &'static str,
    /// The figure as a script sees it (`cpu_us_per_call`).
    pub figure: &'static str,
    pub unit: Unit,
    /// One per server, in the order of the servers; `None` if not measured.
    pub values: Vec<Option<f64>>,
    /// The largest ratio (first / second server) the issue asks for.
    pub target: Option<f64>,
    /// The largest value of the first server the issue asks for (a bound
    /// of its own, not a ratio).
    pub max_first: Option<f64>,
}

impl Row {
    /// First server over second, when both were measured.
    pub fn ratio(&self) -> Option<f64> {
        match self.values.as_slice() {
            [Some(a), Some(b), ..] if *b != 0.0 => Some(a / b),
            _ => None,
        }
    }

    /// Whether the ratio misses its target, or the first value its bound.
    pub fn misses_target(&self) -> bool {
        let first = self.values.first().copied().flatten();
        matches!((self.ratio(), self.target), (Some(r), Some(t)) if r > t)
            || matches!((first, self.max_first), (Some(v), Some(m)) if v > m)
    }
}

fn thousands(v: u64) -> String {
    let digits = v.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

pub fn format_value(unit: Unit, v: f64) -> String {
    match unit {
        Unit::PerSecond => thousands(v.round().max(0.0) as u64),
        Unit::Micros if v >= 10_000.0 => format!("{:.1} ms", v / 1000.0),
        Unit::Micros if v >= 1000.0 => format!("{:.2} ms", v / 1000.0),
        Unit::Micros if v >= 100.0 => format!("{v:.0} µs"),
        Unit::Micros if v >= 10.0 => format!("{v:.1} µs"),
        Unit::Micros => format!("{v:.2} µs"),
        Unit::Bytes if v < 0.0 => format!("−{} B", thousands((-v).round() as u64)),
        Unit::Bytes => format!("{} B", thousands(v.round() as u64)),
    }
}

/// The Markdown table. With two servers it has the ratio and target
/// columns.
pub fn table(servers: &[String], rows: &[Row]) -> String {
    let two = servers.len() >= 2;
    let mut out = String::from("| scenario | figure |");
    for s in servers {
        let _ = write!(out, " {s} |");
    }
    if two {
        let _ = write!(out, " {} / {} | target |", servers[0], servers[1]);
    }
    out.push_str("\n|---|---|");
    for _ in servers {
        out.push_str("---:|");
    }
    if two {
        out.push_str("---:|---|");
    }
    out.push('\n');
    let mut last_scenario = "";
    for row in rows {
        let scenario = if row.scenario == last_scenario {
            ""
        } else {
            row.scenario.as_str()
        };
        last_scenario = &row.scenario;
        let _ = write!(out, "| {scenario} | {} |", row.label);
        for v in &row.values {
            let cell = v.map_or_else(|| "—".to_owned(), |v| format_value(row.unit, v));
            let _ = write!(out, " {cell} |");
        }
        if two {
            let ratio = row
                .ratio()
                .map_or_else(|| "—".to_owned(), |r| format!("{r:.2}×"));
            let first = row.values.first().copied().flatten();
            let target = match (row.target, row.ratio(), row.max_first, first) {
                (Some(t), Some(_), ..) if row.misses_target() => format!("≤ {t}×: **missed**"),
                (Some(t), Some(_), ..) => format!("≤ {t}×: met"),
                (Some(t), None, ..) => format!("≤ {t}×"),
                (None, _, Some(m), Some(v)) => format!(
                    "≤ {}: {}",
                    format_value(row.unit, m),
                    if v > m { "**missed**" } else { "met" }
                ),
                (None, _, Some(m), None) => format!("≤ {}", format_value(row.unit, m)),
                (None, _, None, _) => String::new(),
            };
            let _ = write!(out, " {ratio} | {target} |");
        }
        out.push('\n');
    }
    out
}

/// `BENCH scenario=… figure=… <server>=<value>… [ratio=…]`, one per row.
pub fn machine_lines(servers: &[String], rows: &[Row]) -> String {
    let mut out = String::new();
    for row in rows {
        let _ = write!(out, "BENCH scenario={} figure={}", row.key, row.figure);
        for (s, v) in servers.iter().zip(&row.values) {
            match v {
                Some(v) => {
                    let _ = write!(out, " {s}={v:.3}");
                }
                None => {
                    let _ = write!(out, " {s}=none");
                }
            }
        }
        if let Some(r) = row.ratio() {
            let _ = write!(out, " ratio={r:.4}");
        }
        if let Some(t) = row.target {
            let _ = write!(out, " target_max_ratio={t}");
        }
        if let Some(m) = row.max_first {
            let _ = write!(out, " target_max_first={m}");
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(values: Vec<Option<f64>>, target: Option<f64>) -> Row {
        Row {
            scenario: "echo".into(),
            key: "echo_c1_k1".into(),
            label: "server CPU per call",
            figure: "cpu_us_per_call",
            unit: Unit::Micros,
            values,
            target,
            max_first: None,
        }
    }

    #[test]
    fn values_read_well() {
        assert_eq!(format_value(Unit::PerSecond, 49_123.4), "49,123");
        assert_eq!(format_value(Unit::PerSecond, 999.0), "999");
        assert_eq!(format_value(Unit::Micros, 5.123), "5.12 µs");
        assert_eq!(format_value(Unit::Micros, 72.0), "72.0 µs");
        assert_eq!(format_value(Unit::Micros, 5230.0), "5.23 ms");
        assert_eq!(format_value(Unit::Bytes, 27_345.2), "27,345 B");
        assert_eq!(format_value(Unit::Bytes, -12.0), "−12 B");
    }

    #[test]
    fn ratio_and_target() {
        let met = row(vec![Some(5.0), Some(11.0)], Some(0.5));
        assert!(!met.misses_target());
        let missed = row(vec![Some(6.0), Some(11.0)], Some(0.5));
        assert!(missed.misses_target());
        assert_eq!(row(vec![Some(6.0)], Some(0.5)).ratio(), None);
        let servers = vec!["mcpwire".to_owned(), "tonic".to_owned()];
        let t = table(&servers, &[met, missed.clone()]);
        assert!(
            t.contains("| echo | server CPU per call | 5.00 µs | 11.0 µs | 0.45× | ≤ 0.5×: met |")
        );
        assert!(t.contains(
            "|  | server CPU per call | 6.00 µs | 11.0 µs | 0.55× | ≤ 0.5×: **missed** |"
        ));
        let mut bounded = row(vec![None, Some(27_000.0)], None);
        bounded.unit = Unit::Bytes;
        bounded.max_first = Some(4400.0);
        assert!(!bounded.misses_target());
        bounded.values[0] = Some(5000.0);
        assert!(bounded.misses_target());
        let t = table(&servers, &[bounded]);
        assert!(
            t.ends_with("| 5,000 B | 27,000 B | 0.19× | ≤ 4,400 B: **missed** |\n"),
            "{t}"
        );
        let lines = machine_lines(&servers, &[missed]);
        assert_eq!(
            lines,
            "BENCH scenario=echo_c1_k1 figure=cpu_us_per_call mcpwire=6.000 tonic=11.000 ratio=0.5455 target_max_ratio=0.5\n"
        );
    }
}
