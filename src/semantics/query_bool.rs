//! apimachinery's reading of a boolean query parameter (`?watch=`, `?allowWatchBookmarks=`), as
//! `runtime.Convert_Slice_string_To_bool` (staging/src/k8s.io/apimachinery/pkg/runtime/
//! conversion.go) decodes it into `ListOptions`.

/// The parameter's values in query order → its boolean, as Go decodes it: absent is false, the
/// *first* value `0` or `false` (any case) is false, and everything else is true — `yes`, `2`,
/// and the empty value of `?watch=` or a bare `?watch` included.
pub fn query_bool<'a>(mut values: impl Iterator<Item = &'a str>) -> bool {
    match values.next() {
        None => false,
        Some(v) => !(v == "0" || v.eq_ignore_ascii_case("false")),
    }
}

#[cfg(test)]
mod tests {
    use super::query_bool;

    #[test]
    fn only_absence_zero_and_false_are_false() {
        assert!(!query_bool(std::iter::empty()));
        for f in ["0", "false", "FALSE", "False"] {
            assert!(!query_bool([f].into_iter()), "{f}");
        }
        for t in ["1", "true", "TRUE", "yes", "no", "", "2", "00", " 0"] {
            assert!(query_bool([t].into_iter()), "{t:?}");
        }
        // The first value decides, as `(*in)[0]` does.
        assert!(!query_bool(["false", "true"].into_iter()));
        assert!(query_bool(["true", "false"].into_iter()));
    }
}
