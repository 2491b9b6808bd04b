//! Meshes and shard specs: validating `mesh` items, resolving axis names,
//! and turning written shard specs into [`Shard`]s.

use crate::ty::{AxisRef, Shard};
use std::collections::HashMap;
use tessera_diagnostics::{codes, Diagnostic, Diagnostics, Span};
use tessera_syntax::ast::{self, ExprKind};

/// Most devices a mesh may have.
const MAX_DEVICES: u64 = 1 << 20;

/// The program's meshes with their axes resolved.
#[derive(Default)]
pub struct Meshes {
    axes: Vec<AxisRef>,
}

impl Meshes {
    /// Validates the mesh items and collects their axes.
    pub fn build(meshes: &[&ast::MeshDef], diags: &mut Diagnostics) -> Meshes {
        let mut out = Meshes::default();
        for mesh in meshes {
            if mesh.axes.is_empty() {
                diags.push(
                    Diagnostic::error(
                        codes::E0408,
                        mesh.name.span,
                        format!("mesh `{}` has no axes", mesh.name.text),
                    )
                    .with_label("declared without axes")
                    .with_help("give it named axes: `mesh node(tp = 4, dp = 2);`"),
                );
            }
            let mut seen: HashMap<&str, Span> = HashMap::new();
            let mut devices: u64 = 1;
            for axis in &mesh.axes {
                if let Some(prev) = seen.insert(&axis.name.text, axis.name.span) {
                    diags.push(
                        Diagnostic::error(
                            codes::E0101,
                            axis.name.span,
                            format!("mesh axis `{}` is declared twice", axis.name.text),
                        )
                        .with_label("declared again here")
                        .with_secondary(prev, "first declared here"),
                    );
                    continue;
                }
                let size = match &axis.size.kind {
                    ExprKind::Int(n) if *n >= 1 => *n,
                    _ => {
                        diags.push(
                            Diagnostic::error(
                                codes::E0408,
                                axis.size.span,
                                "mesh axis size must be a positive integer",
                            )
                            .with_label("not a positive integer literal"),
                        );
                        continue;
                    }
                };
                devices = devices.saturating_mul(size);
                out.axes.push(AxisRef {
                    mesh: mesh.name.text.clone(),
                    axis: axis.name.text.clone(),
                    size,
                });
            }
            if devices > MAX_DEVICES {
                diags.push(
                    Diagnostic::error(
                        codes::E0408,
                        mesh.span,
                        format!("mesh `{}` has too many devices", mesh.name.text),
                    )
                    .with_label(format!("{devices} devices"))
                    .with_note(format!("a mesh may have at most {MAX_DEVICES} devices")),
                );
            }
        }
        out
    }

    /// Resolves an axis written as `tp` or `node.tp`.
    pub fn resolve(&self, path: &[ast::Name]) -> Result<AxisRef, Diagnostic> {
        let span = path[0].span.to(path[path.len() - 1].span);
        let (mesh, axis) = match path {
            [axis] => (None, axis),
            [mesh, axis] => (Some(mesh.text.as_str()), axis),
            _ => {
                return Err(Diagnostic::error(
                    codes::E0400,
                    span,
                    "a mesh axis is written `axis` or `mesh.axis`",
                )
                .with_label("too many parts"))
            }
        };
        let matches: Vec<&AxisRef> = self
            .axes
            .iter()
            .filter(|a| a.axis == axis.text && mesh.is_none_or(|m| a.mesh == m))
            .collect();
        match matches.as_slice() {
            [one] => Ok((*one).clone()),
            [] => {
                let mut d = Diagnostic::error(
                    codes::E0400,
                    span,
                    format!("unknown mesh axis `{}`", axis.text),
                )
                .with_label("no mesh declares this axis");
                if self.axes.is_empty() {
                    d = d.with_help("declare a mesh first: `mesh node(tp = 4, dp = 2);`");
                } else {
                    let names: Vec<String> = self
                        .axes
                        .iter()
                        .map(|a| format!("`{}.{}`", a.mesh, a.axis))
                        .collect();
                    d = d.with_note(format!("the axes are {}", names.join(", ")));
                }
                Err(d)
            }
            many => {
                let meshes: Vec<String> = many
                    .iter()
                    .map(|a| format!("`{}.{}`", a.mesh, a.axis))
                    .collect();
                Err(Diagnostic::error(
                    codes::E0409,
                    span,
                    format!("mesh axis `{}` is ambiguous", axis.text),
                )
                .with_label("several meshes declare this axis")
                .with_help(format!("write one of {}", meshes.join(", "))))
            }
        }
    }

    /// An unqualified name as an axis, if exactly one mesh declares it.
    pub fn by_name(&self, name: &str) -> Option<AxisRef> {
        let mut it = self.axes.iter().filter(|a| a.axis == name);
        match (it.next(), it.next()) {
            (Some(a), None) => Some(a.clone()),
            _ => None,
        }
    }

    /// Converts a written shard spec for a tensor of rank `rank`.
    pub fn shard(
        &self,
        spec: &ast::ShardSpec,
        rank: usize,
        diags: &mut Diagnostics,
    ) -> Option<Shard> {
        if spec.entries.len() != rank {
            diags.push(
                Diagnostic::error(
                    codes::E0401,
                    spec.span,
                    format!(
                        "shard spec has {} entries for a tensor of rank {rank}",
                        spec.entries.len()
                    ),
                )
                .with_label("one entry per dimension is needed")
                .with_help("write `_` for each dimension that is not split"),
            );
            return None;
        }
        let mut dims = Vec::with_capacity(rank);
        let mut used: HashMap<AxisRef, Span> = HashMap::new();
        for entry in &spec.entries {
            match entry {
                ast::ShardEntry::Replicated(_) => dims.push(None),
                ast::ShardEntry::Axis(path) => {
                    let span = path[0].span.to(path[path.len() - 1].span);
                    match self.resolve(path) {
                        Ok(axis) => {
                            if let Some(prev) = used.insert(axis.clone(), span) {
                                diags.push(
                                    Diagnostic::error(
                                        codes::E0402,
                                        span,
                                        format!("mesh axis `{}` splits two dimensions", axis.axis),
                                    )
                                    .with_label("used again here")
                                    .with_secondary(prev, "first used here"),
                                );
                                dims.push(None);
                            } else {
                                dims.push(Some(axis));
                            }
                        }
                        Err(d) => {
                            diags.push(d);
                            dims.push(None);
                        }
                    }
                }
            }
        }
        Some(Shard {
            dims,
            partial: Vec::new(),
        })
    }
}
