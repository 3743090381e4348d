//! What the stream shares: type names, class definitions and back references, and the
//! containers they number, made into [`Value`]s.

use super::cursor::Decoder;
use super::error::{DecodeError, Result};
use super::tree::{Body, ClassDef, Node, PREALLOCATE, Slot};
use crate::tag::*;
use crate::value::{List, Map, Object, Value};

impl<'a> Decoder<'a> {
    /// A list's or map's type: a string (remembered) or an int naming one seen before. An
    /// empty name is no type.
    pub(super) fn read_type(&mut self) -> Result<Option<String>> {
        let at = self.pos;
        let tag = self.byte()?;
        match tag {
            0x00..=0x1f | 0x30..=0x33 | BC_STRING_CHUNK | BC_STRING => {
                let name = self.string_after(tag, at)?;
                if self.types.len() >= self.limits.max_classes {
                    return Err(DecodeError::new(
                        format!(
                            "more than {} type names (max_classes)",
                            self.limits.max_classes
                        ),
                        at,
                    ));
                }
                self.types.push(name.clone());
                Ok(Some(name).filter(|n| !n.is_empty()))
            }
            0x80..=0xd7 | BC_INT => {
                let i = self.int_after(tag, at)?;
                let name = usize::try_from(i)
                    .ok()
                    .and_then(|i| self.types.get(i))
                    .ok_or_else(|| {
                        DecodeError::new(
                            format!(
                                "type reference {i} out of range ({} types)",
                                self.types.len()
                            ),
                            at,
                        )
                    })?;
                Ok(Some(name.clone()).filter(|n| !n.is_empty()))
            }
            other => Err(DecodeError::new(
                format!("expected a type name, found tag 0x{other:02x}"),
                at,
            )),
        }
    }

    fn read_name(&mut self) -> Result<String> {
        let at = self.pos;
        let tag = self.byte()?;
        self.string_after(tag, at)
    }

    pub(super) fn read_class_def(&mut self, at: usize) -> Result<()> {
        if self.classes.len() >= self.limits.max_classes {
            return Err(DecodeError::new(
                format!(
                    "more than {} class definitions (max_classes)",
                    self.limits.max_classes
                ),
                at,
            ));
        }
        let name = self.read_name()?;
        let len = self.read_len()?;
        let mut fields = Vec::with_capacity(len.min(PREALLOCATE));
        let mut bytes = name.len();
        for _ in 0..len {
            let f = self.read_name()?;
            bytes += f.len();
            fields.push(f);
        }
        self.classes.push(ClassDef {
            name,
            fields,
            bytes,
        });
        Ok(())
    }

    /// Opens a container: numbers it for refs and checks the depth.
    pub(super) fn open(&mut self, depth: usize, at: usize) -> Result<usize> {
        if depth >= self.limits.max_depth {
            return Err(DecodeError::new(
                format!("nested deeper than {} (max_depth)", self.limits.max_depth),
                at,
            ));
        }
        if self.nodes.len() >= self.limits.max_refs {
            return Err(DecodeError::new(
                format!(
                    "more than {} lists, maps and objects (max_refs)",
                    self.limits.max_refs
                ),
                at,
            ));
        }
        self.nodes.push(Node {
            body: Body::Open,
            nodes: 1,
            bytes: 0,
            depth: 1,
        });
        Ok(self.nodes.len() - 1)
    }

    /// Closes a container: its body and the size and depth of its materialised form.
    pub(super) fn close(&mut self, index: usize, body: Body, own_bytes: usize) {
        let mut nodes = 1usize;
        let mut bytes = own_bytes;
        let mut depth = 0usize;
        let mut add = |s: &Slot, all: &[Node]| {
            let (n, b, d) = match s {
                Slot::Leaf(Value::String(v)) => (1, v.len(), 0),
                Slot::Leaf(Value::Binary(v)) => (1, v.len(), 0),
                Slot::Leaf(_) | Slot::Cycle(_) => (1, 0, 0),
                Slot::Node(i) | Slot::Copy(i) => (all[*i].nodes, all[*i].bytes, all[*i].depth),
            };
            nodes = nodes.saturating_add(n);
            bytes = bytes.saturating_add(b);
            depth = depth.max(d);
        };
        match &body {
            Body::List { items, .. } => items.iter().for_each(|s| add(s, &self.nodes)),
            Body::Map { entries, .. } => entries.iter().for_each(|(k, v)| {
                add(k, &self.nodes);
                add(v, &self.nodes);
            }),
            Body::Object { fields, .. } => fields.iter().for_each(|s| add(s, &self.nodes)),
            Body::Open => {}
        }
        let node = &mut self.nodes[index];
        node.body = body;
        node.nodes = nodes;
        node.bytes = bytes;
        node.depth = depth + 1;
    }

    pub(super) fn read_ref(&mut self, depth: usize, at: usize) -> Result<Slot> {
        let n = self.read_int()?;
        let node = usize::try_from(n).ok().filter(|&i| i < self.nodes.len());
        let Some(i) = node else {
            return Err(DecodeError::new(
                format!(
                    "ref {n} out of range ({} values to refer to)",
                    self.nodes.len()
                ),
                at,
            ));
        };
        if matches!(self.nodes[i].body, Body::Open) {
            self.charge(1, 0, at)?;
            return Ok(Slot::Cycle(i));
        }
        let (nodes, bytes, d) = (
            self.nodes[i].nodes,
            self.nodes[i].bytes,
            self.nodes[i].depth,
        );
        if depth + d > self.limits.max_depth {
            return Err(DecodeError::new(
                format!(
                    "ref {n} copied here would nest deeper than {} (max_depth)",
                    self.limits.max_depth
                ),
                at,
            ));
        }
        self.charge(nodes, bytes, at)?;
        Ok(Slot::Copy(i))
    }

    pub(super) fn materialize(&self, slot: &Slot) -> Value {
        match slot {
            Slot::Leaf(v) => v.clone(),
            Slot::Cycle(i) => Value::Ref(*i),
            Slot::Node(i) | Slot::Copy(i) => match &self.nodes[*i].body {
                Body::List { class, items } => Value::List(List {
                    class: class.clone(),
                    items: items.iter().map(|s| self.materialize(s)).collect(),
                }),
                Body::Map { class, entries } => Value::Map(Map {
                    class: class.clone(),
                    entries: entries
                        .iter()
                        .map(|(k, v)| (self.materialize(k), self.materialize(v)))
                        .collect(),
                }),
                Body::Object { class, fields } => {
                    let def = &self.classes[*class];
                    Value::Object(Object {
                        class: def.name.clone(),
                        fields: def
                            .fields
                            .iter()
                            .zip(fields)
                            .map(|(name, s)| (name.clone(), self.materialize(s)))
                            .collect(),
                    })
                }
                // Not reachable: a slot names only closed nodes once its read returned.
                Body::Open => Value::Ref(*i),
            },
        }
    }
}
