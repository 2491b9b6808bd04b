//! Collectives across the devices of a mesh axis.
//!
//! [`Communicator`] is the seam between the executors (cpu, sim, cuda) and
//! whatever moves data between devices: every `Step::Collective` of a Tile
//! IR program goes through one. Buffers are bytes with a shape, so an
//! implementation needs to know nothing of dtypes beyond their size.
//!
//! [`Loopback`] is the only implementation today: one process holds the
//! whole *logical* tensor of every device on the axis, so reductions over
//! devices are already complete, gathers and scatters change only which
//! device would hold which part (nothing moves), and the cyclic shifts
//! (`send`/`recv`) rotate the shards of the split dimension. A multi-device
//! implementation (NCCL) takes each device's local shard instead and moves
//! it; the executors call both through this trait.

#![warn(missing_docs)]

use std::fmt;
use tessera_core::CollectiveKind;

/// A buffer a collective reads and writes in place.
#[derive(Debug)]
pub struct Buffer<'a> {
    /// The elements, row-major, each `data.len() / numel(shape)` bytes.
    pub data: &'a mut [u8],
    /// The tensor's shape.
    pub shape: &'a [usize],
    /// The dimension split over the axis, if any.
    pub split: Option<usize>,
}

impl Buffer<'_> {
    /// Bytes per element; 0 for an empty tensor.
    fn elem_bytes(&self) -> usize {
        let n: usize = self.shape.iter().product();
        self.data.len().checked_div(n).unwrap_or(0)
    }
}

/// Why a collective failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommError(pub String);

impl fmt::Display for CommError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for CommError {}

/// The result of a collective.
pub type R = Result<(), CommError>;

/// Moves data between the devices of one mesh axis.
pub trait Communicator {
    /// Devices on the axis.
    fn devices(&self) -> u64;
    /// Sums the partial values of every device; each gets the total.
    fn all_reduce(&self, buf: Buffer<'_>) -> R;
    /// Sums the partial values; each device keeps one slice of `dim`.
    fn reduce_scatter(&self, buf: Buffer<'_>, dim: usize) -> R;
    /// Concatenates the shards of the split dimension on every device.
    fn all_gather(&self, buf: Buffer<'_>) -> R;
    /// Makes `concat_dim` whole and splits `split_dim` instead.
    fn all_to_all(&self, buf: Buffer<'_>, split_dim: usize, concat_dim: usize) -> R;
    /// Cyclic shift: device `i`'s tensor goes to device `i + offset`.
    fn send(&self, buf: Buffer<'_>, offset: i64) -> R;
    /// Cyclic shift: device `i` receives from device `i + offset`.
    fn recv(&self, buf: Buffer<'_>, offset: i64) -> R;

    /// Runs the collective `kind` on `buf`.
    fn run(&self, kind: CollectiveKind, buf: Buffer<'_>) -> R {
        match kind {
            CollectiveKind::AllReduce => self.all_reduce(buf),
            CollectiveKind::AllGather => self.all_gather(buf),
            CollectiveKind::ReduceScatter { dim } => self.reduce_scatter(buf, dim),
            CollectiveKind::AllToAll {
                split_dim,
                concat_dim,
            } => self.all_to_all(buf, split_dim, concat_dim),
            CollectiveKind::Send { offset } => self.send(buf, offset),
            CollectiveKind::Recv { offset } => self.recv(buf, offset),
        }
    }
}

/// Every device of the axis in one process, holding the logical tensor
/// (see the crate documentation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Loopback {
    /// Devices on the axis.
    pub devices: u64,
}

impl Loopback {
    /// Rotates the shards of the split dimension by `offset` shards: the
    /// shard of device `i` moves to device `i + offset`. Nothing moves when
    /// the dimension does not split evenly.
    fn shift(&self, buf: Buffer<'_>, offset: i64) -> R {
        let Some(d) = buf.split else {
            return Ok(());
        };
        let Some(&len) = buf.shape.get(d) else {
            return Err(CommError(format!(
                "dimension {d} is split, but the tensor has rank {}",
                buf.shape.len()
            )));
        };
        let devices = self.devices.max(1);
        if len == 0 || (len as u64) % devices != 0 {
            return Ok(());
        }
        let shard = len as u64 / devices;
        // Reduce the offset first so that the product cannot overflow.
        let rows = (offset.rem_euclid(devices as i64) as u64 * shard) as usize;
        if rows == 0 {
            return Ok(());
        }
        let inner: usize = buf.shape[d + 1..].iter().product::<usize>() * buf.elem_bytes();
        for block in buf.data.chunks_exact_mut(len * inner) {
            block.rotate_right(rows * inner);
        }
        Ok(())
    }
}

impl Communicator for Loopback {
    fn devices(&self) -> u64 {
        self.devices
    }

    fn all_reduce(&self, _: Buffer<'_>) -> R {
        Ok(())
    }

    fn reduce_scatter(&self, _: Buffer<'_>, _: usize) -> R {
        Ok(())
    }

    fn all_gather(&self, _: Buffer<'_>) -> R {
        Ok(())
    }

    fn all_to_all(&self, _: Buffer<'_>, _: usize, _: usize) -> R {
        Ok(())
    }

    fn send(&self, buf: Buffer<'_>, offset: i64) -> R {
        self.shift(buf, offset)
    }

    fn recv(&self, buf: Buffer<'_>, offset: i64) -> R {
        self.shift(buf, offset.saturating_neg())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows(devices: u64, kind: CollectiveKind, shape: &[usize], split: Option<usize>) -> Vec<u8> {
        let mut data: Vec<u8> = (0..shape.iter().product::<usize>() as u8).collect();
        let buf = Buffer {
            data: &mut data,
            shape,
            split,
        };
        Loopback { devices }.run(kind, buf).unwrap();
        data
    }

    #[test]
    fn shifts_rotate_whole_shards() {
        // 4 rows of 2 over 2 devices: shards are rows {0,1} and {2,3}.
        let sent = rows(2, CollectiveKind::Send { offset: 1 }, &[4, 2], Some(0));
        assert_eq!(sent, [4, 5, 6, 7, 0, 1, 2, 3]);
        let back = rows(2, CollectiveKind::Recv { offset: 1 }, &[4, 2], Some(0));
        assert_eq!(back, sent, "with two devices, +1 and -1 agree");
        let three = rows(4, CollectiveKind::Recv { offset: 1 }, &[4, 1], Some(0));
        assert_eq!(three, [1, 2, 3, 0]);
        // An inner split dimension rotates within each outer block.
        let inner = rows(2, CollectiveKind::Send { offset: 1 }, &[2, 2], Some(1));
        assert_eq!(inner, [1, 0, 3, 2]);
    }

    #[test]
    fn uneven_or_unsplit_tensors_do_not_move() {
        let n = [0, 1, 2];
        assert_eq!(
            rows(2, CollectiveKind::Send { offset: 1 }, &[3], Some(0)),
            n
        );
        assert_eq!(rows(2, CollectiveKind::Send { offset: 1 }, &[3], None), n);
        assert_eq!(rows(2, CollectiveKind::AllReduce, &[3], Some(0)), n);
        assert_eq!(
            rows(2, CollectiveKind::Send { offset: i64::MIN }, &[2], Some(0)),
            [0, 1]
        );
    }

    #[test]
    fn a_split_beyond_the_rank_is_an_error() {
        let mut data = [0u8; 2];
        let buf = Buffer {
            data: &mut data,
            shape: &[2],
            split: Some(3),
        };
        assert!(Loopback { devices: 2 }.send(buf, 1).is_err());
    }
}
