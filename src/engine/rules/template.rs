//! `{{ expression }}` templates in rule text (`summary`, `next`, `rules_out[].because`).
//!
//! Each placeholder is a CEL expression over the same variables as the rule's `when`, compiled when
//! the rule is loaded and rendered with [`super::super::facts::value::display_text`] (lists joined by
//! `, `, numbers without noise). A placeholder that fails to evaluate renders as `?` rather than
//! losing the whole verdict; the loader has already evaluated it against the fact-model sample.

use cel::Context;

use super::Expr;
use crate::engine::facts::value::display_text;

/// One piece of a template.
#[derive(Debug)]
pub enum Part {
    /// Literal text.
    Text(String),
    /// A placeholder.
    Expr(Expr),
}

/// A compiled template.
#[derive(Debug)]
pub struct Template {
    /// The source text, as written.
    pub source: String,
    /// Literal and placeholder parts in order.
    pub parts: Vec<Part>,
}

/// Split a template into literal text and placeholder sources. `Err` names an unclosed `{{`.
pub fn split(text: &str) -> Result<Vec<(bool, String)>, String> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find("{{") {
        if start > 0 {
            out.push((false, rest[..start].to_string()));
        }
        let after = &rest[start + 2..];
        let end = after
            .find("}}")
            .ok_or_else(|| format!("unclosed '{{{{' in {text:?}"))?;
        let expr = after[..end].trim();
        if expr.is_empty() {
            return Err(format!("empty '{{{{ }}}}' in {text:?}"));
        }
        out.push((true, expr.to_string()));
        rest = &after[end + 2..];
    }
    if !rest.is_empty() {
        out.push((false, rest.to_string()));
    }
    Ok(out)
}

impl Template {
    /// Render in a context.
    pub fn render(&self, ctx: &Context<'_, '_>) -> String {
        let mut s = String::new();
        for p in &self.parts {
            match p {
                Part::Text(t) => s.push_str(t),
                Part::Expr(e) => match e.program.execute(ctx) {
                    Ok(v) => s.push_str(&display_text(&v)),
                    Err(_) => s.push('?'),
                },
            }
        }
        s
    }

    /// The placeholder expressions.
    pub fn exprs(&self) -> impl Iterator<Item = &Expr> {
        self.parts.iter().filter_map(|p| match p {
            Part::Expr(e) => Some(e),
            Part::Text(_) => None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_text_and_placeholders() {
        assert_eq!(
            split("kubectl -n {{service.namespace}} get ep {{ service.name }}").unwrap(),
            vec![
                (false, "kubectl -n ".into()),
                (true, "service.namespace".into()),
                (false, " get ep ".into()),
                (true, "service.name".into()),
            ]
        );
        assert!(split("oops {{ x").is_err());
        assert!(split("{{ }}").is_err());
        assert_eq!(split("plain").unwrap(), vec![(false, "plain".into())]);
    }
}
