//! The clock: the current time as `metav1.Time` text (RFC 3339, second precision), which
//! every timestamp the emulator writes (`creationTimestamp`, `deletionTimestamp`,
//! `managedFields[].time`, CRD conditions) comes from, and the age of such a timestamp.

use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

/// Current time as RFC 3339 with second precision (`metav1.Time`).
pub(crate) fn now() -> String {
    let t = OffsetDateTime::now_utc()
        .replace_nanosecond(0)
        .unwrap_or(OffsetDateTime::UNIX_EPOCH);
    t.format(&Rfc3339).unwrap_or_default()
}

/// Whole seconds from an RFC 3339 timestamp until now (negative for a future one);
/// `None` when `ts` is not RFC 3339.
pub(crate) fn seconds_since(ts: &str) -> Option<i64> {
    let t = OffsetDateTime::parse(ts, &Rfc3339).ok()?;
    Some((OffsetDateTime::now_utc() - t).whole_seconds())
}
