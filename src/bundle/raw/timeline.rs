//! Time in raw evidence, and the collection time of an imported bundle.
//!
//! Raw files carry time in several shapes: full timestamps (HTTP `date:` headers, object
//! `creationTimestamp`s, Go `log` and etcd lines, JSON log `ts`) and klog headers, which have a month
//! and a day but no year (`I1129 08:42:30.287457`). A klog time can only be placed once the import has
//! seen everything: its year is taken from the latest fully dated evidence, or from the import time
//! when nothing is dated. So readers record a [`Stamp`] and [`Clock`] resolves them at the end.
//!
//! klog writes local time without a zone; the captures (and most control planes) run in UTC, which
//! is what is assumed here.

use jiff::{SignedDuration, Timestamp, civil, tz::TimeZone};

/// A point in time as a file gave it: complete, or without a year (klog).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stamp {
    /// A complete instant.
    Full(Timestamp),
    /// A klog time: month, day and time of day, no year.
    Yearless {
        month: i8,
        day: i8,
        time: civil::Time,
    },
}

impl Stamp {
    fn in_year(self, year: i16) -> Option<Timestamp> {
        match self {
            Stamp::Full(t) => Some(t),
            Stamp::Yearless { month, day, time } => civil::Date::new(year, month, day)
                .ok()?
                .to_datetime(time)
                .to_zoned(TimeZone::UTC)
                .ok()
                .map(|z| z.timestamp()),
        }
    }
}

/// Resolves yearless stamps against the dated evidence of the whole import.
pub(crate) struct Clock {
    reference: Timestamp,
    year: i16,
}

/// How far past the reference a yearless stamp may land before it is taken to belong to the year
/// before (a December log read next to January evidence).
const YEAR_ROLLOVER: SignedDuration = SignedDuration::from_hours(24 * 183);

impl Clock {
    /// A clock whose reference is the latest fully dated stamp, or `now` when none is dated.
    pub(crate) fn new<'a>(stamps: impl IntoIterator<Item = &'a Stamp>, now: Timestamp) -> Self {
        let latest = stamps
            .into_iter()
            .filter_map(|s| match s {
                Stamp::Full(t) => Some(*t),
                Stamp::Yearless { .. } => None,
            })
            .max();
        let reference = latest.unwrap_or(now);
        let year = reference.to_zoned(TimeZone::UTC).year();
        Clock { reference, year }
    }

    /// The instant a stamp stands for.
    pub(crate) fn resolve(&self, stamp: Stamp) -> Option<Timestamp> {
        let t = stamp.in_year(self.year)?;
        if matches!(stamp, Stamp::Yearless { .. }) {
            let ahead = t.duration_since(self.reference);
            if ahead > YEAR_ROLLOVER {
                return stamp.in_year(self.year - 1);
            }
            if ahead < -YEAR_ROLLOVER {
                return stamp.in_year(self.year + 1);
            }
        }
        Some(t)
    }
}

/// An RFC 3339 timestamp (`2026-11-29T08:42:12Z`).
pub(crate) fn parse_rfc3339(s: &str) -> Option<Timestamp> {
    s.trim().parse::<Timestamp>().ok()
}

/// An HTTP `Date` header (`Sun, 29 Nov 2026 08:42:19 GMT`).
pub(crate) fn parse_http_date(s: &str) -> Option<Timestamp> {
    jiff::fmt::rfc2822::DateTimeParser::new()
        .parse_timestamp(s.trim())
        .ok()
}

/// A civil date and time read in UTC (Go `log` lines, etcd's capnslog lines).
pub(crate) fn utc(
    year: i16,
    month: i8,
    day: i8,
    hour: i8,
    minute: i8,
    second: i8,
    nanos: i32,
) -> Option<Timestamp> {
    civil::DateTime::new(year, month, day, hour, minute, second, nanos)
        .ok()?
        .to_zoned(TimeZone::UTC)
        .ok()
        .map(|z| z.timestamp())
}

/// Fractional seconds as written (`371479` or `287457123`) → nanoseconds.
pub(crate) fn fraction_nanos(digits: &str) -> i32 {
    let mut padded: String = digits.chars().take(9).collect();
    while padded.len() < 9 {
        padded.push('0');
    }
    padded.parse().unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn yearless_stamps_take_the_year_of_dated_evidence() {
        let dated = Stamp::Full("2026-11-29T08:42:19Z".parse().unwrap());
        let klog = Stamp::Yearless {
            month: 11,
            day: 29,
            time: civil::time(8, 43, 16, 0),
        };
        let clock = Clock::new([&dated, &klog], "2030-01-01T00:00:00Z".parse().unwrap());
        assert_eq!(
            clock.resolve(klog).unwrap().to_string(),
            "2026-11-29T08:43:16Z"
        );
        // A December klog line next to January evidence belongs to the year before.
        let jan = Stamp::Full("2027-01-02T00:00:00Z".parse().unwrap());
        let dec = Stamp::Yearless {
            month: 12,
            day: 31,
            time: civil::time(23, 0, 0, 0),
        };
        let clock = Clock::new([&jan], Timestamp::UNIX_EPOCH);
        assert_eq!(
            clock.resolve(dec).unwrap().to_string(),
            "2026-12-31T23:00:00Z"
        );
    }

    #[test]
    fn http_dates_parse() {
        let t = parse_http_date("Sun, 29 Nov 2026 08:42:19 GMT").unwrap();
        assert_eq!(t.to_string(), "2026-11-29T08:42:19Z");
    }
}
