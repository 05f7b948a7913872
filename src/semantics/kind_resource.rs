//! apimachinery's guess of a resource from a kind (`meta.UnsafeGuessKindToResource`), what kubectl
//! and the API server fall back on when discovery cannot say.

/// The resource `kind` names: lower case; `…endpoints` stays as it is (apimachinery's
/// `unpluralizedSuffixes`); `-s` → `-ses`, `-y` → `-ies`, else `-s`.
pub fn guess_resource(kind: &str) -> String {
    let singular = kind.to_ascii_lowercase();
    if singular.is_empty() || singular.ends_with("endpoints") {
        return singular;
    }
    if singular.ends_with('s') {
        return format!("{singular}es");
    }
    if let Some(stem) = singular.strip_suffix('y') {
        return format!("{stem}ies");
    }
    format!("{singular}s")
}

#[cfg(test)]
mod tests {
    use super::guess_resource;

    #[test]
    fn kinds_guess_their_resource_as_apimachinery_does() {
        assert_eq!(guess_resource("ConfigMap"), "configmaps");
        assert_eq!(guess_resource("configmap"), "configmaps");
        assert_eq!(guess_resource("Ingress"), "ingresses");
        assert_eq!(guess_resource("NetworkPolicy"), "networkpolicies");
        assert_eq!(guess_resource("Endpoints"), "endpoints");
        assert_eq!(guess_resource("EndpointSlice"), "endpointslices");
    }
}
