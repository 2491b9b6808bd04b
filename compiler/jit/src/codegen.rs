//! Host IR to Cranelift IR, into any Cranelift module (JIT or object).

use std::collections::HashMap;

use cranelift_codegen::ir::condcodes::{FloatCC, IntCC};
use cranelift_codegen::ir::{
    types, AbiParam, Block, FuncRef, InstBuilder, MemFlagsData, Signature, StackSlotData,
    StackSlotKind, Type, UserFuncName, Value,
};
use cranelift_codegen::Context;
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext, Variable};
use cranelift_module::{FuncId, Linkage, Module};
use tessera_host::{self as host, Cmp, FloatOp, HostFn, HostModule, Inst, IntOp, Kind, Term};

use tessera_host::abi;

/// A code generation failure (a bug in the compiler, or a limit of the
/// target).
#[derive(Debug, Clone)]
pub struct CodegenError(pub String);

impl std::fmt::Display for CodegenError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

fn err(e: impl std::fmt::Display) -> CodegenError {
    CodegenError(e.to_string())
}

fn ty(k: Kind) -> Type {
    match k {
        Kind::Int | Kind::Handle => types::I64,
        Kind::Float => types::F64,
        Kind::Bool => types::I8,
    }
}

fn import_signatures<M: Module>(m: &M) -> Vec<(&'static str, Signature)> {
    let ptr = m.target_config().pointer_type();
    let sig = |params: &[Type], ret: Option<Type>| {
        let mut s = m.make_signature();
        s.params.extend(params.iter().map(|t| AbiParam::new(*t)));
        s.returns.extend(ret.map(AbiParam::new));
        s
    };
    vec![
        (
            abi::CALL,
            sig(&[ptr, types::I32, ptr, types::I32], Some(types::I64)),
        ),
        (abi::RETAIN, sig(&[types::I64], None)),
        (abi::RELEASE, sig(&[types::I64], None)),
        (abi::FAIL, sig(&[ptr, types::I32], None)),
        (abi::ENTER, sig(&[ptr, types::I32], None)),
        (abi::LEAVE, sig(&[ptr], None)),
        (abi::FMOD, sig(&[types::F64, types::F64], Some(types::F64))),
        (abi::POW, sig(&[types::F64, types::F64], Some(types::F64))),
    ]
}

fn fn_signature<M: Module>(m: &M, f: &HostFn) -> Signature {
    let mut s = m.make_signature();
    s.params
        .push(AbiParam::new(m.target_config().pointer_type()));
    for v in &f.vars[..f.params] {
        s.params.push(AbiParam::new(ty(v.kind)));
    }
    if let Some(k) = f.ret {
        s.returns.push(AbiParam::new(ty(k)));
    }
    s
}

/// Declares and defines every function of `host` in `m`; the entry is
/// exported as [`abi::ENTRY`]. Returns the entry's id.
pub fn define<M: Module>(m: &mut M, host: &HostModule) -> Result<FuncId, CodegenError> {
    let mut imports: HashMap<&'static str, FuncId> = HashMap::new();
    for (name, sig) in import_signatures(m) {
        let id = m
            .declare_function(name, Linkage::Import, &sig)
            .map_err(err)?;
        imports.insert(name, id);
    }
    let mut ids = Vec::new();
    for (i, f) in host.functions.iter().enumerate() {
        let sig = fn_signature(m, f);
        let id = if i == 0 {
            m.declare_function(abi::ENTRY, Linkage::Export, &sig)
        } else {
            m.declare_function(&format!("tsr_host_{i}_{}", f.name), Linkage::Local, &sig)
        }
        .map_err(err)?;
        ids.push(id);
    }
    let mut ctx = m.make_context();
    let mut fctx = FunctionBuilderContext::new();
    for (i, f) in host.functions.iter().enumerate() {
        ctx.func.signature = fn_signature(m, f);
        ctx.func.name = UserFuncName::user(0, ids[i].as_u32());
        FnGen::build(m, host, f, &ids, &imports, &mut ctx, &mut fctx)?;
        m.define_function(ids[i], &mut ctx)
            .map_err(|e| CodegenError(format!("host fn `{}`: {e:?}", f.name)))?;
        m.clear_context(&mut ctx);
    }
    Ok(ids[0])
}

struct FnGen<'b, 'h> {
    b: FunctionBuilder<'b>,
    host: &'h HostModule,
    f: &'h HostFn,
    ctx_ptr: Value,
    ptr: Type,
    vars: Vec<Variable>,
    blocks: Vec<Block>,
    values: Vec<Option<Value>>,
    funcs: HashMap<&'static str, FuncRef>,
    callees: Vec<FuncRef>,
    unwind: Block,
}

impl<'b, 'h> FnGen<'b, 'h> {
    fn build<M: Module>(
        m: &mut M,
        host: &'h HostModule,
        f: &'h HostFn,
        ids: &[FuncId],
        imports: &HashMap<&'static str, FuncId>,
        ctx: &'b mut Context,
        fctx: &'b mut FunctionBuilderContext,
    ) -> Result<(), CodegenError> {
        let ptr = m.target_config().pointer_type();
        let mut b = FunctionBuilder::new(&mut ctx.func, fctx);
        let mut funcs = HashMap::new();
        for (name, id) in imports {
            funcs.insert(*name, m.declare_func_in_func(*id, b.func));
        }
        let callees = ids
            .iter()
            .map(|id| m.declare_func_in_func(*id, b.func))
            .collect();
        let blocks: Vec<Block> = f.blocks.iter().map(|_| b.create_block()).collect();
        let unwind = b.create_block();
        let entry = blocks[0];
        b.append_block_params_for_function_params(entry);
        b.switch_to_block(entry);
        let params = b.block_params(entry).to_vec();
        let vars: Vec<Variable> = f.vars.iter().map(|v| b.declare_var(ty(v.kind))).collect();
        for (i, v) in f.vars.iter().enumerate() {
            let init = if i < f.params {
                params[i + 1]
            } else {
                match v.kind {
                    Kind::Float => b.ins().f64const(0.0),
                    k => b.ins().iconst(ty(k), 0),
                }
            };
            b.def_var(vars[i], init);
        }
        let mut g = FnGen {
            b,
            host,
            f,
            ctx_ptr: params[0],
            ptr,
            vars,
            blocks,
            values: vec![None; f.values.len()],
            funcs,
            callees,
            unwind,
        };
        for (i, block) in f.blocks.iter().enumerate() {
            if i > 0 {
                g.b.switch_to_block(g.blocks[i]);
            }
            for d in &block.insts {
                let v = g.inst(&d.inst)?;
                if let (Some(r), Some(v)) = (d.result, v) {
                    g.values[r.index()] = Some(v);
                }
            }
            g.term(&block.term)?;
        }
        // A failed call: return at once; the caller checks the flag too.
        g.b.switch_to_block(g.unwind);
        match f.ret {
            None => g.b.ins().return_(&[]),
            Some(k) => {
                let z = match k {
                    Kind::Float => g.b.ins().f64const(0.0),
                    k => g.b.ins().iconst(ty(k), 0),
                };
                g.b.ins().return_(&[z])
            }
        };
        g.b.seal_all_blocks();
        g.b.finalize(m.target_config());
        Ok(())
    }

    fn val(&self, v: host::Value) -> Result<Value, CodegenError> {
        self.values
            .get(v.index())
            .copied()
            .flatten()
            .ok_or_else(|| {
                CodegenError(format!(
                    "host fn `{}`: {v} used before its definition",
                    self.f.name
                ))
            })
    }

    fn call_import(&mut self, name: &'static str, args: &[Value]) -> Option<Value> {
        let f = self.funcs[name];
        let call = self.b.ins().call(f, args);
        self.b.inst_results(call).first().copied()
    }

    /// Continues only if the runtime's failure flag is clear.
    fn check_failed(&mut self) {
        let flag = self.b.ins().load(
            types::I8,
            MemFlagsData::trusted(),
            self.ctx_ptr,
            abi::FAILED_OFFSET,
        );
        let cont = self.b.create_block();
        self.b.ins().brif(flag, self.unwind, &[], cont, &[]);
        self.b.switch_to_block(cont);
    }

    /// Fails at `site` when `cond` holds.
    fn fail_if(&mut self, cond: Value, site: host::SiteId) {
        let bad = self.b.create_block();
        let cont = self.b.create_block();
        self.b.ins().brif(cond, bad, &[], cont, &[]);
        self.b.switch_to_block(bad);
        let s = self.b.ins().iconst(types::I32, i64::from(site.0));
        self.call_import(abi::FAIL, &[self.ctx_ptr, s]);
        self.b.ins().jump(self.unwind, &[]);
        self.b.switch_to_block(cont);
    }

    fn inst(&mut self, inst: &Inst) -> Result<Option<Value>, CodegenError> {
        Ok(Some(match inst {
            Inst::IConst(n) => self.b.ins().iconst(types::I64, *n),
            Inst::FConst(x) => self.b.ins().f64const(*x),
            Inst::BConst(v) => self.b.ins().iconst(types::I8, i64::from(*v)),
            Inst::Int(op, a, c, site) => {
                let (a, c) = (self.val(*a)?, self.val(*c)?);
                match op {
                    IntOp::Add | IntOp::Sub | IntOp::Mul => {
                        let (r, of) = match op {
                            IntOp::Add => self.b.ins().sadd_overflow(a, c),
                            IntOp::Sub => self.b.ins().ssub_overflow(a, c),
                            _ => self.b.ins().smul_overflow(a, c),
                        };
                        self.fail_if(of, *site);
                        r
                    }
                    IntOp::Div | IntOp::Rem => {
                        let zero = self.b.ins().icmp_imm_s(IntCC::Equal, c, 0);
                        let min = self.b.ins().icmp_imm_s(IntCC::Equal, a, i64::MIN);
                        let neg1 = self.b.ins().icmp_imm_s(IntCC::Equal, c, -1);
                        let both = self.b.ins().band(min, neg1);
                        let bad = self.b.ins().bor(zero, both);
                        self.fail_if(bad, *site);
                        if *op == IntOp::Div {
                            self.b.ins().sdiv(a, c)
                        } else {
                            self.b.ins().srem(a, c)
                        }
                    }
                    IntOp::And => self.b.ins().band(a, c),
                    IntOp::Or => self.b.ins().bor(a, c),
                    IntOp::Xor => self.b.ins().bxor(a, c),
                    // Cranelift takes the count modulo 64: a count outside
                    // 0..64 gives 0 (`<<`) or the sign (`>>`) instead.
                    IntOp::Shl | IntOp::Shr => {
                        let inside = self.b.ins().icmp_imm_u(IntCC::UnsignedLessThan, c, 64);
                        if *op == IntOp::Shl {
                            let shifted = self.b.ins().ishl(a, c);
                            let zero = self.b.ins().iconst(types::I64, 0);
                            self.b.ins().select(inside, shifted, zero)
                        } else {
                            let shifted = self.b.ins().sshr(a, c);
                            let sign = self.b.ins().sshr_imm_u(a, 63);
                            self.b.ins().select(inside, shifted, sign)
                        }
                    }
                }
            }
            Inst::Float(op, a, c) => {
                let (a, c) = (self.val(*a)?, self.val(*c)?);
                match op {
                    FloatOp::Add => self.b.ins().fadd(a, c),
                    FloatOp::Sub => self.b.ins().fsub(a, c),
                    FloatOp::Mul => self.b.ins().fmul(a, c),
                    FloatOp::Div => self.b.ins().fdiv(a, c),
                    FloatOp::Max => self.b.ins().fmax(a, c),
                    FloatOp::Min => self.b.ins().fmin(a, c),
                    FloatOp::Rem => self.call_import(abi::FMOD, &[a, c]).expect("fmod returns"),
                    FloatOp::Pow => self.call_import(abi::POW, &[a, c]).expect("pow returns"),
                }
            }
            Inst::ICmp(c, a, x) => {
                let cc = match c {
                    Cmp::Eq => IntCC::Equal,
                    Cmp::Ne => IntCC::NotEqual,
                    Cmp::Lt => IntCC::SignedLessThan,
                    Cmp::Le => IntCC::SignedLessThanOrEqual,
                    Cmp::Gt => IntCC::SignedGreaterThan,
                    Cmp::Ge => IntCC::SignedGreaterThanOrEqual,
                };
                let (a, x) = (self.val(*a)?, self.val(*x)?);
                self.b.ins().icmp(cc, a, x)
            }
            Inst::FCmp(c, a, x) => {
                let cc = match c {
                    Cmp::Eq => FloatCC::Equal,
                    Cmp::Ne => FloatCC::NotEqual,
                    Cmp::Lt => FloatCC::LessThan,
                    Cmp::Le => FloatCC::LessThanOrEqual,
                    Cmp::Gt => FloatCC::GreaterThan,
                    Cmp::Ge => FloatCC::GreaterThanOrEqual,
                };
                let (a, x) = (self.val(*a)?, self.val(*x)?);
                self.b.ins().fcmp(cc, a, x)
            }
            Inst::And(a, c) => {
                let (a, c) = (self.val(*a)?, self.val(*c)?);
                self.b.ins().band(a, c)
            }
            Inst::Or(a, c) => {
                let (a, c) = (self.val(*a)?, self.val(*c)?);
                self.b.ins().bor(a, c)
            }
            Inst::Not(a) => {
                let a = self.val(*a)?;
                self.b.ins().bxor_imm_u(a, 1)
            }
            Inst::FNeg(a) => {
                let a = self.val(*a)?;
                self.b.ins().fneg(a)
            }
            Inst::IToF(a) => {
                let a = self.val(*a)?;
                self.b.ins().fcvt_from_sint(types::F64, a)
            }
            Inst::BToI(a) => {
                let a = self.val(*a)?;
                self.b.ins().uextend(types::I64, a)
            }
            Inst::Get(v) => self.b.use_var(self.vars[v.index()]),
            Inst::Set(v, x) => {
                let x = self.val(*x)?;
                self.b.def_var(self.vars[v.index()], x);
                return Ok(None);
            }
            Inst::Call(callee, args, site) => {
                let s = self.b.ins().iconst(types::I32, i64::from(site.0));
                self.call_import(abi::ENTER, &[self.ctx_ptr, s]);
                self.check_failed();
                let mut vals = vec![self.ctx_ptr];
                for a in args {
                    vals.push(self.val(*a)?);
                }
                let f = self.callees[callee.index()];
                let call = self.b.ins().call(f, &vals);
                let r = self.b.inst_results(call).first().copied();
                self.call_import(abi::LEAVE, &[self.ctx_ptr]);
                self.check_failed();
                return Ok(r);
            }
            Inst::Runtime(site, args) => return self.runtime(*site, args),
            Inst::Retain(a) => {
                let a = self.val(*a)?;
                self.call_import(abi::RETAIN, &[a]);
                return Ok(None);
            }
            Inst::Release(a) => {
                let a = self.val(*a)?;
                self.call_import(abi::RELEASE, &[a]);
                return Ok(None);
            }
        }))
    }

    fn runtime(
        &mut self,
        site: host::SiteId,
        args: &[host::Value],
    ) -> Result<Option<Value>, CodegenError> {
        let n = args.len().max(1) as u32;
        let slot = self.b.create_sized_stack_slot(StackSlotData::new(
            StackSlotKind::ExplicitSlot,
            n * 8,
            3,
        ));
        for (i, a) in args.iter().enumerate() {
            let v = self.val(*a)?;
            let word = match self.f.kind(*a) {
                Kind::Int | Kind::Handle => v,
                Kind::Float => self.b.ins().bitcast(types::I64, MemFlagsData::new(), v),
                Kind::Bool => self.b.ins().uextend(types::I64, v),
            };
            self.b
                .ins()
                .stack_store(self.ptr, word, slot, (i * 8) as i32);
        }
        let addr = self.b.ins().stack_addr(self.ptr, slot, 0);
        let s = self.b.ins().iconst(types::I32, i64::from(site.0));
        let count = self.b.ins().iconst(types::I32, args.len() as i64);
        let word = self
            .call_import(abi::CALL, &[self.ctx_ptr, s, addr, count])
            .expect("tsr_call returns a word");
        self.check_failed();
        let result = self.host.site(site).result;
        Ok(result.map(|k| match k {
            Kind::Int | Kind::Handle => word,
            Kind::Float => self.b.ins().bitcast(types::F64, MemFlagsData::new(), word),
            Kind::Bool => self.b.ins().ireduce(types::I8, word),
        }))
    }

    fn term(&mut self, t: &Term) -> Result<(), CodegenError> {
        match t {
            Term::Jump(to) => {
                self.b.ins().jump(self.blocks[to.index()], &[]);
            }
            Term::Branch(c, then, other) => {
                let c = self.val(*c)?;
                self.b.ins().brif(
                    c,
                    self.blocks[then.index()],
                    &[],
                    self.blocks[other.index()],
                    &[],
                );
            }
            Term::Return(v) => {
                let vals = match v {
                    Some(v) => vec![self.val(*v)?],
                    None => Vec::new(),
                };
                self.b.ins().return_(&vals);
            }
        }
        Ok(())
    }
}
