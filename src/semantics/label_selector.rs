//! Label selectors as apimachinery evaluates them (`k8s.io/apimachinery/pkg/labels`:
//! `Requirement.Matches`, `Parse`; `metav1.LabelSelectorAsSelector` for the structured form).
//!
//! One set of requirements serves both spellings: the structured `matchLabels`/`matchExpressions`
//! of webhooks and other objects, and the text of a `labelSelector=` query
//! (`app=x,tier!=db,env in (a,b),!legacy,replicas>1`). The rules that matter for a diagnosis are
//! the asymmetric ones: `In`/`=` need the label present, `NotIn`/`!=` also hold when it is absent,
//! and `Gt`/`Lt` compare integers and fail on a value that is not one. An empty selector matches
//! everything; an unknown operator (which validation rejects) matches nothing.

/// A requirement's operator (`selection.Operator`; `=`/`==` are `In` of one value, `!=` is `NotIn`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operator {
    /// `In`, `=`, `==`: the label is present with one of the values.
    In,
    /// `NotIn`, `!=`: the label is absent or has none of the values.
    NotIn,
    /// `Exists`, `key`: the label is present.
    Exists,
    /// `DoesNotExist`, `!key`: the label is absent.
    DoesNotExist,
    /// `Gt`, `key>n`: the label is an integer greater than the value.
    GreaterThan,
    /// `Lt`, `key<n`: the label is an integer less than the value.
    LessThan,
    /// An operator Kubernetes does not know; matches nothing.
    Unknown,
}

/// One requirement of a selector.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Requirement {
    /// Label key.
    pub key: String,
    /// Operator.
    pub operator: Operator,
    /// Values (`In`, `NotIn`, `Gt`, `Lt`).
    pub values: Vec<String>,
}

impl Requirement {
    /// A `matchExpressions` entry (`In`, `NotIn`, `Exists`, `DoesNotExist`).
    pub fn from_expression(key: &str, operator: &str, values: Vec<String>) -> Self {
        let operator = match operator {
            "In" => Operator::In,
            "NotIn" => Operator::NotIn,
            "Exists" => Operator::Exists,
            "DoesNotExist" => Operator::DoesNotExist,
            _ => Operator::Unknown,
        };
        Requirement {
            key: key.to_string(),
            operator,
            values,
        }
    }

    /// A `matchLabels` entry: `key` equals `value`.
    pub fn equals(key: &str, value: &str) -> Self {
        Requirement {
            key: key.to_string(),
            operator: Operator::In,
            values: vec![value.to_string()],
        }
    }

    /// Whether a label value (`None`: the label is absent) satisfies the requirement.
    pub fn matches(&self, value: Option<&str>) -> bool {
        let has = |v: &str| self.values.iter().any(|x| x == v);
        match self.operator {
            Operator::In => value.is_some_and(has),
            Operator::NotIn => value.is_none_or(|v| !has(v)),
            Operator::Exists => value.is_some(),
            Operator::DoesNotExist => value.is_none(),
            Operator::GreaterThan | Operator::LessThan => {
                let (Some(label), [bound]) = (value, self.values.as_slice()) else {
                    return false;
                };
                match (label.parse::<i64>(), bound.parse::<i64>()) {
                    (Ok(l), Ok(b)) if self.operator == Operator::GreaterThan => l > b,
                    (Ok(l), Ok(b)) => l < b,
                    _ => false,
                }
            }
            Operator::Unknown => false,
        }
    }
}

/// Whether every requirement holds for the labels `get` looks up.
pub fn matches_all<'l>(reqs: &[Requirement], get: impl Fn(&str) -> Option<&'l str>) -> bool {
    reqs.iter().all(|r| r.matches(get(&r.key)))
}

/// A selector text that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unable to parse requirement: {requirement}")]
pub struct ParseError {
    /// The requirement (the text between commas) that does not parse.
    pub requirement: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Token<'a> {
    Ident(&'a str),
    Not,
    Eq,
    NotEq,
    Gt,
    Lt,
    Open,
    Close,
    Comma,
}

/// apimachinery's lexer: operators and parentheses are tokens, anything else up to whitespace or
/// an operator is an identifier (`in` and `notin` are identifiers the parser reads as keywords).
fn lex(text: &str) -> Vec<Token<'_>> {
    let special = |c: char| c.is_whitespace() || "!=<>(),".contains(c);
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(c) = rest.chars().next() {
        let (token, len) = match c {
            c if c.is_whitespace() => (None, c.len_utf8()),
            '!' if rest.starts_with("!=") => (Some(Token::NotEq), 2),
            '!' => (Some(Token::Not), 1),
            '=' if rest.starts_with("==") => (Some(Token::Eq), 2),
            '=' => (Some(Token::Eq), 1),
            '>' => (Some(Token::Gt), 1),
            '<' => (Some(Token::Lt), 1),
            '(' => (Some(Token::Open), 1),
            ')' => (Some(Token::Close), 1),
            // Commas only appear inside a value list here: requirements are split before.
            ',' => (Some(Token::Comma), 1),
            _ => {
                let len = rest.find(special).unwrap_or(rest.len());
                (Some(Token::Ident(&rest[..len])), len)
            }
        };
        out.extend(token);
        rest = &rest[len..];
    }
    out
}

/// The values of `(a, b)`: empty entries are the empty value, as in apimachinery (`()`, `(a,)`).
fn value_list(tokens: &[Token<'_>]) -> Option<Vec<String>> {
    let [Token::Open, inner @ .., Token::Close] = tokens else {
        return None;
    };
    let mut values = vec![String::new()];
    for t in inner {
        match t {
            Token::Comma => values.push(String::new()),
            Token::Ident(v) if values.last().is_some_and(String::is_empty) => {
                if let Some(last) = values.last_mut() {
                    *last = v.to_string();
                }
            }
            _ => return None,
        }
    }
    values.sort();
    values.dedup();
    Some(values)
}

fn parse_requirement(text: &str) -> Option<Requirement> {
    let tokens = lex(text);
    let req = |key: &str, operator, values| {
        Some(Requirement {
            key: key.to_string(),
            operator,
            values,
        })
    };
    match tokens.as_slice() {
        [Token::Not, Token::Ident(k)] => req(k, Operator::DoesNotExist, vec![]),
        [Token::Ident(k)] => req(k, Operator::Exists, vec![]),
        // `key=` is the empty value, which a label may have.
        [Token::Ident(k), Token::Eq] => req(k, Operator::In, vec![String::new()]),
        [Token::Ident(k), Token::NotEq] => req(k, Operator::NotIn, vec![String::new()]),
        [Token::Ident(k), Token::Eq, Token::Ident(v)] => req(k, Operator::In, vec![v.to_string()]),
        [Token::Ident(k), Token::NotEq, Token::Ident(v)] => {
            req(k, Operator::NotIn, vec![v.to_string()])
        }
        // apimachinery refuses a bound that is not an integer when it parses the selector.
        [
            Token::Ident(k),
            op @ (Token::Gt | Token::Lt),
            Token::Ident(v),
        ] => {
            v.parse::<i64>().ok()?;
            let operator = if *op == Token::Gt {
                Operator::GreaterThan
            } else {
                Operator::LessThan
            };
            req(k, operator, vec![v.to_string()])
        }
        [
            Token::Ident(k),
            Token::Ident(kw @ ("in" | "notin")),
            list @ ..,
        ] => {
            let operator = if *kw == "in" {
                Operator::In
            } else {
                Operator::NotIn
            };
            req(k, operator, value_list(list)?)
        }
        _ => None,
    }
}

/// Parse the text form of a selector (`labels.Parse`); the empty text selects everything.
///
/// # Errors
/// [`ParseError`] naming the first requirement that does not parse.
pub fn parse(text: &str) -> Result<Vec<Requirement>, ParseError> {
    let mut parts = Vec::new();
    let mut depth = 0i32;
    let mut start = 0;
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&text[start..]);
    if parts.len() == 1 && parts[0].trim().is_empty() {
        return Ok(Vec::new());
    }
    parts
        .iter()
        .map(|p| {
            parse_requirement(p).ok_or_else(|| ParseError {
                requirement: p.trim().to_string(),
            })
        })
        .collect()
}

/// The requirements of a `metav1.LabelSelector` as stored JSON (`matchLabels` then
/// `matchExpressions`, as `LabelSelectorAsSelector` builds them). A missing selector has none.
pub fn requirements_of_json(sel: &serde_json::Value) -> Vec<Requirement> {
    use serde_json::Value;
    let strs = |v: &Value| -> Vec<String> {
        v.as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .map(String::from)
            .collect()
    };
    sel["matchLabels"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(k, v)| Requirement::equals(k, v.as_str().unwrap_or("")))
        .chain(
            sel["matchExpressions"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|e| {
                    Requirement::from_expression(
                        e["key"].as_str().unwrap_or(""),
                        e["operator"].as_str().unwrap_or(""),
                        strs(&e["values"]),
                    )
                }),
        )
        .collect()
}

/// Whether a stored `metav1.LabelSelector` selects an object's stored `metadata.labels`.
pub fn json_selector_matches(sel: &serde_json::Value, labels: &serde_json::Value) -> bool {
    matches_all(&requirements_of_json(sel), |k| {
        labels.get(k).and_then(serde_json::Value::as_str)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    // The cases with their Go sources are in tests/semantics/label_selector.yaml; these pin the
    // parser's shape and its error wording (what the reference server's 400 says).
    #[test]
    fn text_parses_into_requirements_and_errors_name_the_requirement() {
        let reqs = parse("app=x, tier!=db,env in (a, b),!legacy,n>1").unwrap();
        let ops: Vec<Operator> = reqs.iter().map(|r| r.operator).collect();
        assert_eq!(
            ops,
            [
                Operator::In,
                Operator::NotIn,
                Operator::In,
                Operator::DoesNotExist,
                Operator::GreaterThan
            ]
        );
        assert_eq!(reqs[2].values, ["a", "b"]);
        assert_eq!(
            parse("app=x,env in (a").unwrap_err().to_string(),
            "unable to parse requirement: env in (a"
        );
        assert!(parse("  ").unwrap().is_empty());
    }
}
