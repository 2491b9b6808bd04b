//! Simulated device memory: allocations at fixed addresses, byte-exact
//! accesses from many host threads at once, and bounds checks.
//!
//! Bytes are atomics (relaxed): blocks run on several host threads, and a
//! kernel that races on global memory must give *some* answer, never
//! undefined behaviour in the simulator.

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex, RwLock};

/// Where the first allocation starts; address 0 and its neighbourhood stay
/// unmapped so that null pointers fault.
const FIRST_ADDRESS: u64 = 0x7_0000_0000;

/// Allocations are aligned (and separated) to this.
const ALIGN: u64 = 256;

/// One allocation.
struct Allocation {
    base: u64,
    bytes: Box<[AtomicU8]>,
    /// Held through an atomic read-modify-write (`red`), so that blocks on
    /// several host threads combining into one element all count.
    rmw: Mutex<()>,
}

/// The device's global memory.
#[derive(Default)]
pub struct Global {
    /// Live allocations, sorted by base address.
    allocations: RwLock<Vec<Arc<Allocation>>>,
    /// The next free address.
    next: std::sync::atomic::AtomicU64,
}

/// Why an access failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fault {
    /// No allocation holds `[addr, addr + size)`.
    OutOfBounds,
}

impl Global {
    /// A fresh, empty memory.
    pub fn new() -> Global {
        Global {
            allocations: RwLock::new(Vec::new()),
            next: std::sync::atomic::AtomicU64::new(FIRST_ADDRESS),
        }
    }

    /// Allocates `bytes` zeroed bytes; returns the address.
    pub fn alloc(&self, bytes: usize) -> u64 {
        let size = (bytes as u64).max(1).div_ceil(ALIGN) * ALIGN;
        // Leave a gap after each allocation, so that running off its end
        // faults instead of landing in the next one.
        let base = self
            .next
            .fetch_add(size + ALIGN, std::sync::atomic::Ordering::Relaxed);
        let a = Arc::new(Allocation {
            base,
            bytes: (0..bytes).map(|_| AtomicU8::new(0)).collect(),
            rmw: Mutex::new(()),
        });
        let mut list = self.allocations.write().unwrap_or_else(|e| e.into_inner());
        let at = list.partition_point(|x| x.base < base);
        list.insert(at, a);
        base
    }

    /// Frees the allocation at `base`; `false` if there is none.
    pub fn free(&self, base: u64) -> bool {
        let mut list = self.allocations.write().unwrap_or_else(|e| e.into_inner());
        match list.iter().position(|a| a.base == base) {
            Some(i) => {
                list.remove(i);
                true
            }
            None => false,
        }
    }

    /// A view of memory for one host thread (a snapshot of the allocation
    /// table: allocations do not change during a launch).
    pub fn view(&self) -> View {
        View {
            allocations: self
                .allocations
                .read()
                .unwrap_or_else(|e| e.into_inner())
                .clone(),
            last: 0,
        }
    }
}

/// A host thread's handle on global memory, remembering the last
/// allocation it touched.
pub struct View {
    allocations: Vec<Arc<Allocation>>,
    last: usize,
}

impl View {
    /// The allocation and offset of `[addr, addr + size)`.
    fn find(&mut self, addr: u64, size: u64) -> Result<(&Allocation, usize), Fault> {
        let fits = |a: &Allocation| {
            addr >= a.base && addr.saturating_add(size) <= a.base + a.bytes.len() as u64
        };
        if !self.allocations.get(self.last).is_some_and(|a| fits(a)) {
            let i = self.allocations.partition_point(|a| a.base <= addr);
            if i == 0 || !fits(&self.allocations[i - 1]) {
                return Err(Fault::OutOfBounds);
            }
            self.last = i - 1;
        }
        let a = &self.allocations[self.last];
        Ok((a, (addr - a.base) as usize))
    }

    /// Reads `out.len()` bytes at `addr`.
    pub fn read(&mut self, addr: u64, out: &mut [u8]) -> Result<(), Fault> {
        let (a, off) = self.find(addr, out.len() as u64)?;
        for (o, b) in out.iter_mut().zip(&a.bytes[off..]) {
            *o = b.load(Ordering::Relaxed);
        }
        Ok(())
    }

    /// Writes `data` at `addr`.
    pub fn write(&mut self, addr: u64, data: &[u8]) -> Result<(), Fault> {
        let (a, off) = self.find(addr, data.len() as u64)?;
        for (d, b) in data.iter().zip(&a.bytes[off..]) {
            b.store(*d, Ordering::Relaxed);
        }
        Ok(())
    }

    /// Reads a little-endian value of `size` bytes (1, 2, 4 or 8).
    pub fn load(&mut self, addr: u64, size: usize) -> Result<u64, Fault> {
        let mut b = [0u8; 8];
        self.read(addr, &mut b[..size])?;
        Ok(u64::from_le_bytes(b))
    }

    /// Replaces the `size`-byte value `v` at `addr` by `f(v)` atomically
    /// with respect to other updates.
    pub fn update(
        &mut self,
        addr: u64,
        size: usize,
        f: impl FnOnce(u64) -> u64,
    ) -> Result<(), Fault> {
        let (a, off) = self.find(addr, size as u64)?;
        let _held = a.rmw.lock().unwrap_or_else(|e| e.into_inner());
        let mut b = [0u8; 8];
        for (o, x) in b[..size].iter_mut().zip(&a.bytes[off..]) {
            *o = x.load(Ordering::Relaxed);
        }
        let new = f(u64::from_le_bytes(b)).to_le_bytes();
        for (d, x) in new[..size].iter().zip(&a.bytes[off..]) {
            x.store(*d, Ordering::Relaxed);
        }
        Ok(())
    }

    /// Writes the low `size` bytes of `v`, little-endian.
    pub fn store(&mut self, addr: u64, size: usize, v: u64) -> Result<(), Fault> {
        self.write(addr, &v.to_le_bytes()[..size])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accesses_are_bounds_checked() {
        let g = Global::new();
        let a = g.alloc(10);
        let b = g.alloc(4);
        let mut v = g.view();
        v.store(a + 8, 2, 0xBEEF).unwrap();
        assert_eq!(v.load(a + 8, 2).unwrap(), 0xBEEF);
        assert_eq!(v.load(a + 9, 2), Err(Fault::OutOfBounds));
        assert_eq!(v.load(a - 1, 1), Err(Fault::OutOfBounds));
        assert_eq!(v.load(0, 4), Err(Fault::OutOfBounds));
        assert_eq!(v.load(b, 4).unwrap(), 0);
        assert!(g.free(a));
        assert_eq!(g.view().load(a, 1), Err(Fault::OutOfBounds));
    }
}
