//! The two descriptions Python hands over as nested tuples, parsed once into Rust trees: the
//! reader-side Arrow layout (`Shape`) and the writer-to-reader decoding program (`Op`), and the
//! check that a program only ever writes kinds its target can hold.

use std::ffi::CString;

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;

/// A node of the reader-side layout: what it holds and the Arrow format string it exports.
#[derive(Debug, PartialEq)]
pub struct Shape {
    pub kind: Kind,
    pub format: CString,
}

#[derive(Debug, PartialEq)]
pub enum Kind {
    Null,
    Bool,
    I32,
    I64,
    F32,
    F64,
    Var {
        utf8: bool,
    },
    Fixed(usize),
    /// `wide`: decimal256 (two i128 halves per value), else decimal128 bounded by its precision.
    Decimal {
        wide: bool,
        precision: u32,
    },
    Struct(Vec<Child>),
    List(Box<Child>),
    /// The map's value; keys are utf8 and never null.
    Map(Box<Child>),
}

#[derive(Debug, PartialEq)]
pub struct Child {
    pub name: CString,
    pub nullable: bool,
    pub shape: Shape,
}

/// One step of the decoding program (see the module documentation of `avro`).
#[derive(Debug)]
pub enum Op {
    Null,
    Bool,
    Int,
    Long,
    Float,
    Double,
    Bytes,
    String,
    Fixed(usize),
    DecimalBytes,
    DecimalFixed(usize),
    /// The reader's symbol (UTF-8) per writer index, `None` where the reader has none; the writer's
    /// names, for the error message.
    Enum {
        symbols: Vec<Option<Box<[u8]>>>,
        names: Vec<String>,
    },
    Record(Vec<Step>),
    /// `item_min_bytes`: the fewest bytes one item consumes, which bounds a block's item count.
    Array {
        item: Box<Op>,
        item_min_bytes: usize,
    },
    Map(Box<Op>),
    Union(Vec<Op>),
    Fail(String),
}

#[derive(Debug)]
pub enum Step {
    Field(usize, Op),
    Skip(Op),
    /// The reader field's default: `op` run over its Avro encoding.
    Default(usize, Box<[u8]>, Op),
}

fn value_error(message: impl Into<String>) -> PyErr {
    PyValueError::new_err(message.into())
}

/// The items of a tuple or list (a str is refused).
fn items<'py>(obj: &Bound<'py, PyAny>, what: &str) -> PyResult<Vec<Bound<'py, PyAny>>> {
    obj.extract()
        .map_err(|_| PyTypeError::new_err(format!("{what} must be a tuple or list, not {obj}")))
}

fn item<'py>(items: &[Bound<'py, PyAny>], index: usize, what: &str) -> PyResult<Bound<'py, PyAny>> {
    items
        .get(index)
        .cloned()
        .ok_or_else(|| value_error(format!("{what} has no item {index}")))
}

fn c_string(text: String, what: &str) -> PyResult<CString> {
    CString::new(text).map_err(|_| value_error(format!("{what} contains a NUL character")))
}

fn child(name: &str, nullable: bool, shape: Shape) -> PyResult<Child> {
    Ok(Child {
        name: c_string(name.to_owned(), "a field name")?,
        nullable,
        shape,
    })
}

/// "d:P,S" or "d:P,S,BITS": the precision, and whether BITS (128 unless given) matches `width`.
fn decimal_precision(format: &str, width: usize) -> Option<u32> {
    let parts: Vec<&str> = format.strip_prefix("d:")?.split(',').collect();
    let bits = match parts.as_slice() {
        [_, _] => 128,
        [_, _, bits] => bits.parse().ok()?,
        _ => return None,
    };
    parts[1].parse::<i32>().ok()?;
    let precision = parts[0].parse().ok()?;
    (bits == width * 8 && (bits == 128 || bits == 256)).then_some(precision)
}

pub fn parse_shape(obj: &Bound<'_, PyAny>) -> PyResult<Shape> {
    let parts = items(obj, "a shape")?;
    let kind: String = item(&parts, 0, "a shape")?.extract()?;
    let format: String = item(&parts, 1, "a shape")?.extract()?;
    let fits = |allowed: &[&str]| allowed.contains(&format.as_str());
    let kind = match kind.as_str() {
        "null" if fits(&["n"]) => Kind::Null,
        "bool" if fits(&["b"]) => Kind::Bool,
        "i32" if fits(&["i", "tdD", "ttm"]) => Kind::I32,
        "i64" if fits(&["l", "ttu", "tsm:UTC", "tsu:UTC", "tsm:", "tsu:"]) => Kind::I64,
        "f32" if fits(&["f"]) => Kind::F32,
        "f64" if fits(&["g"]) => Kind::F64,
        "var" if fits(&["z", "u"]) => Kind::Var {
            utf8: format == "u",
        },
        "fixed" => {
            let size: usize = item(&parts, 2, "a fixed shape")?.extract()?;
            if format != format!("w:{size}") {
                return Err(value_error(format!(
                    "fixed of {size} bytes with format {format:?}"
                )));
            }
            Kind::Fixed(size)
        }
        "decimal" => {
            let width: usize = item(&parts, 2, "a decimal shape")?.extract()?;
            let precision = decimal_precision(&format, width).ok_or_else(|| {
                value_error(format!("decimal of {width} bytes with format {format:?}"))
            })?;
            Kind::Decimal {
                wide: width == 32,
                precision,
            }
        }
        "struct" if fits(&["+s"]) => {
            let mut children = Vec::new();
            for field in items(&item(&parts, 2, "a struct shape")?, "struct fields")? {
                let (name, nullable, shape): (String, bool, Bound<'_, PyAny>) = field.extract()?;
                children.push(child(&name, nullable, parse_shape(&shape)?)?);
            }
            Kind::Struct(children)
        }
        "list" | "map" if fits(&["+l", "+m"]) && (kind == "list") == (format == "+l") => {
            let nullable: bool = item(&parts, 2, "a list or map shape")?.extract()?;
            let inner = parse_shape(&item(&parts, 3, "a list or map shape")?)?;
            if kind == "list" {
                Kind::List(Box::new(child("item", nullable, inner)?))
            } else {
                Kind::Map(Box::new(child("value", nullable, inner)?))
            }
        }
        _ => {
            return Err(value_error(format!(
                "unknown shape kind {kind:?} with format {format:?}"
            )))
        }
    };
    Ok(Shape {
        kind,
        format: c_string(format, "a format")?,
    })
}

fn parse_ops(obj: &Bound<'_, PyAny>) -> PyResult<Vec<Op>> {
    items(obj, "a list of ops")?.iter().map(parse_op).collect()
}

pub fn parse_op(obj: &Bound<'_, PyAny>) -> PyResult<Op> {
    let parts = items(obj, "an op")?;
    let name: String = item(&parts, 0, "an op")?.extract()?;
    let arg = |index: usize| item(&parts, index, &format!("op {name:?}"));
    Ok(match name.as_str() {
        "null" => Op::Null,
        "bool" => Op::Bool,
        "int" => Op::Int,
        "long" => Op::Long,
        "float" => Op::Float,
        "double" => Op::Double,
        "bytes" => Op::Bytes,
        "string" => Op::String,
        "fixed" => Op::Fixed(arg(1)?.extract()?),
        "decimal_bytes" => Op::DecimalBytes,
        "decimal_fixed" => Op::DecimalFixed(arg(1)?.extract()?),
        "enum" => {
            let symbols: Vec<Option<String>> = arg(1)?.extract()?;
            let names: Vec<String> = arg(2)?.extract()?;
            if symbols.len() != names.len() {
                return Err(value_error(
                    "an enum op needs one reader symbol per writer name",
                ));
            }
            let symbols = symbols
                .into_iter()
                .map(|s| s.map(|s| s.into_bytes().into_boxed_slice()))
                .collect();
            Op::Enum { symbols, names }
        }
        "record" => {
            let steps = items(&arg(1)?, "record steps")?;
            Op::Record(steps.iter().map(parse_step).collect::<PyResult<_>>()?)
        }
        "array" => {
            let item = parse_op(&arg(1)?)?;
            Op::Array {
                item_min_bytes: min_bytes(&item),
                item: Box::new(item),
            }
        }
        "map" => Op::Map(Box::new(parse_op(&arg(1)?)?)),
        "union" => Op::Union(parse_ops(&arg(1)?)?),
        "fail" => Op::Fail(arg(1)?.extract()?),
        _ => return Err(value_error(format!("unknown op {name:?}"))),
    })
}

fn parse_step(obj: &Bound<'_, PyAny>) -> PyResult<Step> {
    let parts = items(obj, "a record step")?;
    let name: String = item(&parts, 0, "a record step")?.extract()?;
    let arg = |index: usize| item(&parts, index, &format!("step {name:?}"));
    Ok(match name.as_str() {
        "field" => Step::Field(arg(1)?.extract()?, parse_op(&arg(2)?)?),
        "skip" => Step::Skip(parse_op(&arg(1)?)?),
        "default" => {
            let payload: Vec<u8> = arg(2)?.extract()?;
            Step::Default(arg(1)?.extract()?, payload.into(), parse_op(&arg(3)?)?)
        }
        _ => return Err(value_error(format!("unknown record step {name:?}"))),
    })
}

/// The fewest bytes of the value's payload that `op` consumes when it succeeds.
fn min_bytes(op: &Op) -> usize {
    match op {
        Op::Null | Op::Fail(_) => 0,
        Op::Float => 4,
        Op::Double => 8,
        Op::Fixed(size) | Op::DecimalFixed(size) => *size,
        Op::Record(steps) => steps
            .iter()
            .map(|step| match step {
                Step::Field(_, op) | Step::Skip(op) => min_bytes(op),
                Step::Default(..) => 0,
            })
            .fold(0, usize::saturating_add),
        _ => 1,
    }
}

fn op_name(op: &Op) -> &'static str {
    match op {
        Op::Null => "null",
        Op::Bool => "bool",
        Op::Int => "int",
        Op::Long => "long",
        Op::Float => "float",
        Op::Double => "double",
        Op::Bytes => "bytes",
        Op::String => "string",
        Op::Fixed(_) => "fixed",
        Op::DecimalBytes => "decimal_bytes",
        Op::DecimalFixed(_) => "decimal_fixed",
        Op::Enum { .. } => "enum",
        Op::Record(_) => "record",
        Op::Array { .. } => "array",
        Op::Map(_) => "map",
        Op::Union(_) => "union",
        Op::Fail(_) => "fail",
    }
}

fn kind_name(kind: &Kind) -> &'static str {
    match kind {
        Kind::Null => "null",
        Kind::Bool => "bool",
        Kind::I32 => "i32",
        Kind::I64 => "i64",
        Kind::F32 => "f32",
        Kind::F64 => "f64",
        Kind::Var { utf8: true } => "utf8",
        Kind::Var { utf8: false } => "binary",
        Kind::Fixed(_) => "fixed",
        Kind::Decimal { .. } => "decimal",
        Kind::Struct(_) => "struct",
        Kind::List(_) => "list",
        Kind::Map(_) => "map",
    }
}

/// Checks that `op` only writes what `shape` (nullable or not at this place) can hold; the error
/// names the place by its path from the root ("value").
pub fn check(op: &Op, shape: &Shape, nullable: bool, path: &str) -> PyResult<()> {
    let kind = &shape.kind;
    let fits = match op {
        Op::Null => nullable || *kind == Kind::Null,
        Op::Bool => *kind == Kind::Bool,
        Op::Int => matches!(kind, Kind::I32 | Kind::I64 | Kind::F32 | Kind::F64),
        Op::Long => matches!(kind, Kind::I64 | Kind::F32 | Kind::F64),
        Op::Float => matches!(kind, Kind::F32 | Kind::F64),
        Op::Double => *kind == Kind::F64,
        Op::Bytes | Op::String | Op::Enum { .. } => matches!(kind, Kind::Var { .. }),
        Op::Fixed(size) => *kind == Kind::Fixed(*size),
        Op::DecimalBytes | Op::DecimalFixed(_) => matches!(kind, Kind::Decimal { .. }),
        Op::Fail(_) => true,
        Op::Union(branches) => {
            for branch in branches {
                check(branch, shape, nullable, path)?;
            }
            true
        }
        Op::Record(steps) => match kind {
            Kind::Struct(children) => return check_record(steps, children, path),
            _ => false,
        },
        Op::Array { item, .. } => match kind {
            Kind::List(child) => {
                return check(item, &child.shape, child.nullable, &format!("{path}.item"))
            }
            _ => false,
        },
        Op::Map(value) => match kind {
            Kind::Map(child) => {
                return check(
                    value,
                    &child.shape,
                    child.nullable,
                    &format!("{path}.value"),
                )
            }
            _ => false,
        },
    };
    if fits {
        return Ok(());
    }
    let nullability = if nullable { "nullable" } else { "non-nullable" };
    Err(value_error(format!(
        "op {} cannot write into {path}, a {nullability} {}",
        op_name(op),
        kind_name(kind)
    )))
}

fn check_record(steps: &[Step], children: &[Child], path: &str) -> PyResult<()> {
    let mut filled = vec![0_usize; children.len()];
    for step in steps {
        let (index, op) = match step {
            Step::Skip(_) => continue,
            Step::Field(index, op) | Step::Default(index, _, op) => (*index, op),
        };
        let child = children.get(index).ok_or_else(|| {
            value_error(format!(
                "{path} has {} fields, no field {index}",
                children.len()
            ))
        })?;
        let name = child.name.to_string_lossy();
        check(op, &child.shape, child.nullable, &format!("{path}.{name}"))?;
        filled[index] += 1;
    }
    match filled.iter().position(|&count| count != 1) {
        None => Ok(()),
        Some(index) => Err(value_error(format!(
            "{path}.{} is filled {} times by the record op, not once",
            children[index].name.to_string_lossy(),
            filled[index]
        ))),
    }
}
