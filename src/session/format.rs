//! Record framing and the binary sample encoding (see the module docs of [`super`]).
//!
//! # Limits a reader enforces
//! - A record's length field may claim at most [`MAX_PAYLOAD`] (16 MiB) and no more bytes than
//!   the file still holds; any other candidate is rejected before its checksum is computed.
//! - Checking a candidate record costs bounded work whatever length it claims (a [`Scanner`]
//!   derives range checksums from prefix checksums), so resynchronising through a file full of
//!   record markers is linear in its size.
//! - A sample names at most 4096 devices, each with an index of at most [`MAX_DEVICE_INDEX`]
//!   and none twice, and at most as many processes as its payload has bytes; else it is
//!   malformed.

use crate::model::{DeviceSample, TorchMem, UnixMs};

/// The two bytes that start every record.
pub const MAGIC: [u8; 2] = [0xA5, 0x57];
/// Header record.
pub const KIND_HEADER: u8 = 1;
/// Sample record.
pub const KIND_SAMPLE: u8 = 2;
/// Event record.
pub const KIND_EVENT: u8 = 3;
/// Largest payload a reader accepts (a guard against garbage lengths). A record whose length
/// field claims more, or more bytes than the buffer still holds, is rejected before any
/// checksum is computed.
pub(crate) const MAX_PAYLOAD: usize = 16 << 20;
/// Largest device index a sample may name; a sample naming a larger one is malformed (readers
/// size tables by device index, so a garbage index must not reach them).
const MAX_DEVICE_INDEX: u32 = 4095;
/// Distance in bytes between the checksum checkpoints of a [`Scanner`]: checking one candidate
/// record costs it at most `2 * CRC_STRIDE` bytes of hashing (and a few multiplications),
/// whatever length the candidate claims.
pub const CRC_STRIDE: usize = 64;

/// Appends `v` as a LEB128 varint.
pub fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Reads a varint at `*pos`, advancing it; `None` on truncation or overflow.
///
/// Up to three bytes (ids, a process's memory up to 512 GiB) are read inline; longer ones by a
/// loop.
#[inline]
pub fn get_varint(buf: &[u8], pos: &mut usize) -> Option<u64> {
    let b0 = *buf.get(*pos)?;
    if b0 & 0x80 == 0 {
        *pos += 1;
        return Some(u64::from(b0));
    }
    let b1 = *buf.get(*pos + 1)?;
    let low = u64::from(b0 & 0x7F) | (u64::from(b1 & 0x7F) << 7);
    if b1 & 0x80 == 0 {
        *pos += 2;
        return Some(low);
    }
    let b2 = *buf.get(*pos + 2)?;
    if b2 & 0x80 == 0 {
        *pos += 3;
        return Some(low | (u64::from(b2) << 14));
    }
    get_long_varint(buf, pos)
}

/// [`get_varint`] of a varint of any length.
#[inline(never)]
fn get_long_varint(buf: &[u8], pos: &mut usize) -> Option<u64> {
    let mut v: u64 = 0;
    for shift in (0..64).step_by(7) {
        let b = *buf.get(*pos)?;
        *pos += 1;
        v |= u64::from(b & 0x7F) << shift;
        if b & 0x80 == 0 {
            return Some(v);
        }
    }
    None
}

/// Frames `payload` as one record.
pub fn frame(kind: u8, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(payload.len() + 12);
    frame_into(&mut out, kind, payload);
    out
}

/// Appends the record [`frame`] makes of `payload` to `out` (a writer's kept buffer).
pub(crate) fn frame_into(out: &mut Vec<u8>, kind: u8, payload: &[u8]) {
    out.extend_from_slice(&MAGIC);
    let body_start = out.len();
    out.push(kind);
    put_varint(out, payload.len() as u64);
    out.extend_from_slice(payload);
    let crc = crc32fast::hash(&out[body_start..]);
    out.extend_from_slice(&crc.to_le_bytes());
}

/// One record found in a buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RawRecord<'a> {
    /// Record kind.
    pub kind: u8,
    /// Payload bytes.
    pub payload: &'a [u8],
    /// Offset of the record's first byte.
    pub offset: usize,
}

/// Where the parts of a candidate record lie, checked against everything but its checksum.
#[derive(Debug, Clone, Copy)]
struct Bounds {
    kind: u8,
    /// First byte the checksum covers (the kind byte).
    body_start: usize,
    payload_start: usize,
    /// One past the payload (where the stored checksum starts).
    end: usize,
    /// The stored checksum.
    crc: u32,
}

/// Checks the marker, the kind and the length at `pos`: the length may claim at most
/// [`MAX_PAYLOAD`] bytes and no more than the buffer holds after it (so no checksum is ever
/// computed over a length the buffer cannot back).
fn bounds(buf: &[u8], pos: usize) -> Option<Bounds> {
    if buf.get(pos..pos.checked_add(2)?)? != MAGIC {
        return None;
    }
    let body_start = pos + 2;
    let kind = *buf.get(body_start)?;
    if !(KIND_HEADER..=KIND_EVENT).contains(&kind) {
        return None;
    }
    let mut p = body_start + 1;
    let len = get_varint(buf, &mut p)?;
    if len > MAX_PAYLOAD as u64 {
        return None;
    }
    let end = p.checked_add(usize::try_from(len).ok()?)?;
    let crc_bytes = buf.get(end..end.checked_add(4)?)?;
    let crc = u32::from_le_bytes([crc_bytes[0], crc_bytes[1], crc_bytes[2], crc_bytes[3]]);
    Some(Bounds {
        kind,
        body_start,
        payload_start: p,
        end,
        crc,
    })
}

impl Bounds {
    fn record(self, buf: &[u8], pos: usize) -> Option<(RawRecord<'_>, usize)> {
        Some((
            RawRecord {
                kind: self.kind,
                payload: buf.get(self.payload_start..self.end)?,
                offset: pos,
            },
            self.end + 4,
        ))
    }
}

/// Tries to read a whole, checksummed record at `pos`; returns it and the position after it.
///
/// This hashes the whole candidate record, so trying it at many overlapping positions costs
/// up to [`MAX_PAYLOAD`] bytes each: to read a whole buffer, use a [`Scanner`].
pub fn read_record(buf: &[u8], pos: usize) -> Option<(RawRecord<'_>, usize)> {
    let b = bounds(buf, pos)?;
    let body = buf.get(b.body_start..b.end)?;
    count_hashed(body.len());
    if crc32fast::hash(body) != b.crc {
        return None;
    }
    b.record(buf, pos)
}

#[cfg(test)]
thread_local! {
    /// Bytes this thread fed to the checksum of candidate records (tests assert on work done,
    /// not on time).
    static HASHED: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// Counts `n` bytes hashed (in tests; nothing otherwise).
#[inline]
fn count_hashed(n: usize) {
    #[cfg(test)]
    HASHED.with(|h| h.set(h.get() + n as u64));
    #[cfg(not(test))]
    let _ = n;
}

/// Bytes this thread has fed to record checksums so far ([`read_record`] and every
/// [`Scanner`]).
#[cfg(test)]
pub(crate) fn hashed_on_this_thread() -> u64 {
    HASHED.with(std::cell::Cell::get)
}

/// Reads records anywhere in one buffer with checksum work linear in the buffer's size.
///
/// A damaged or hostile file can hold a record marker every few bytes, each claiming a long
/// length; hashing every such candidate in full would cost the claimed length per marker
/// (quadratic in the file size). A scanner hashes the buffer once, keeping the CRC-32 of
/// every prefix that ends on a multiple of [`CRC_STRIDE`], and derives the checksum of any
/// range from the prefix CRCs at its two ends (CRC-32 is linear: see [`crc_shift`]), so one
/// candidate costs at most `2 * CRC_STRIDE` bytes of hashing however long it claims to be.
#[derive(Debug, Clone)]
pub(crate) struct Scanner<'a> {
    buf: &'a [u8],
    /// `checkpoints[j]` is the CRC-32 of `buf[..j * CRC_STRIDE]` (of all of `buf` for the last).
    checkpoints: Vec<u32>,
    hashed: u64,
}

impl<'a> Scanner<'a> {
    /// Hashes `buf` once, keeping the checkpoints.
    pub(crate) fn new(buf: &'a [u8]) -> Self {
        let mut checkpoints = Vec::with_capacity(buf.len() / CRC_STRIDE + 2);
        let mut h = crc32fast::Hasher::new();
        checkpoints.push(h.clone().finalize());
        for chunk in buf.chunks(CRC_STRIDE) {
            h.update(chunk);
            checkpoints.push(h.clone().finalize());
        }
        count_hashed(buf.len());
        Self {
            buf,
            checkpoints,
            hashed: buf.len() as u64,
        }
    }

    /// Bytes fed to the checksum so far: the buffer once, plus at most `2 * CRC_STRIDE` per
    /// candidate record checked.
    pub(crate) fn hashed_bytes(&self) -> u64 {
        self.hashed
    }

    /// Tries to read a whole, checksummed record at `pos`, like [`read_record`] (same result
    /// for every input), at a bounded cost.
    pub(crate) fn read_at(&mut self, pos: usize) -> Option<(RawRecord<'a>, usize)> {
        let b = bounds(self.buf, pos)?;
        if self.range_crc(b.body_start, b.end)? != b.crc {
            return None;
        }
        b.record(self.buf, pos)
    }

    /// The first record marker at or after `from`, if any.
    pub(crate) fn next_marker(&self, from: usize) -> Option<usize> {
        let rest = self.buf.get(from..)?;
        rest.windows(2).position(|w| w == MAGIC).map(|i| from + i)
    }

    /// CRC-32 of `buf[start..end]`.
    fn range_crc(&mut self, start: usize, end: usize) -> Option<u32> {
        let bytes = self.buf.get(start..end)?;
        if bytes.len() <= 2 * CRC_STRIDE {
            self.hashed += bytes.len() as u64;
            count_hashed(bytes.len());
            return Some(crc32fast::hash(bytes));
        }
        // crc(A‖B) = shift(crc(A), |B|) ^ crc(B), so crc(B) = crc(A‖B) ^ shift(crc(A), |B|).
        let before = self.prefix_crc(start)?;
        let through = self.prefix_crc(end)?;
        Some(through ^ crc_shift(before, (end - start) as u64))
    }

    /// CRC-32 of `buf[..p]`: the checkpoint at or before `p`, then under `CRC_STRIDE` bytes.
    fn prefix_crc(&mut self, p: usize) -> Option<u32> {
        let j = p / CRC_STRIDE;
        let from = j * CRC_STRIDE;
        let mut h = crc32fast::Hasher::new_with_initial(*self.checkpoints.get(j)?);
        let tail = self.buf.get(from..p)?;
        h.update(tail);
        self.hashed += tail.len() as u64;
        count_hashed(tail.len());
        Some(h.finalize())
    }
}

/// The CRC-32 (IEEE) polynomial, bit-reflected.
const CRC_POLY: u32 = 0xEDB8_8320;
/// The polynomial 1 in the bit-reflected representation (x^k is `1 << (31 - k)`).
const POLY_ONE: u32 = 1 << 31;

/// `a · b mod P` over GF(2), bit-reflected (as zlib's `multmodp`).
fn mul_mod_p(a: u32, mut b: u32) -> u32 {
    if a == 0 {
        return 0;
    }
    let mut m = POLY_ONE;
    let mut p = 0;
    loop {
        if a & m != 0 {
            p ^= b;
            if a & (m - 1) == 0 {
                return p;
            }
        }
        m >>= 1;
        b = if b & 1 != 0 {
            (b >> 1) ^ CRC_POLY
        } else {
            b >> 1
        };
    }
}

/// `POWERS[k][v]` is x^(8 · v · 256^k) mod P: one product per byte of a length.
fn powers() -> &'static [[u32; 256]; 4] {
    static POWERS: std::sync::OnceLock<[[u32; 256]; 4]> = std::sync::OnceLock::new();
    POWERS.get_or_init(|| {
        let mut t = [[0u32; 256]; 4];
        // x^8: one byte of zeros.
        let mut base = POLY_ONE >> 8;
        for row in &mut t {
            row[0] = POLY_ONE;
            for v in 1..256 {
                row[v] = mul_mod_p(row[v - 1], base);
            }
            base = mul_mod_p(row[255], base);
        }
        t
    })
}

/// The CRC-32 of `A` followed by `len` bytes, without the bytes' own contribution: with it,
/// `crc(A‖B) = crc_shift(crc(A), |B|) ^ crc(B)` (zlib's `crc32_combine`). `len` below 2^32.
fn crc_shift(crc: u32, len: u64) -> u32 {
    let t = powers();
    let mut x = POLY_ONE;
    for (k, row) in t.iter().enumerate() {
        let v = ((len >> (8 * k)) & 0xFF) as usize;
        if v != 0 {
            x = mul_mod_p(row[v], x);
        }
    }
    mul_mod_p(x, crc)
}

/// One process entry of a sample: session-local id and memory in bytes.
pub(crate) type ProcEntry = (u32, Option<u64>);

/// Encodes a process's memory: MiB-aligned values (what NVML reports) take 1–3 bytes.
fn put_proc_used(out: &mut Vec<u8>, used: Option<u64>) {
    match used {
        None => put_varint(out, 0),
        Some(b) if b % (1 << 20) == 0 => put_varint(out, ((b >> 20) << 2) | 1),
        Some(b) => put_varint(out, ((b >> 10) << 2) | 2),
    }
}

fn get_proc_used(buf: &[u8], pos: &mut usize) -> Option<Option<u64>> {
    let v = get_varint(buf, pos)?;
    Some(match v & 3 {
        0 => None,
        1 => Some((v >> 2) << 20),
        _ => Some((v >> 2) << 10),
    })
}

/// PyTorch's allocator figures of one process of a sample (format version 2): the process's
/// position in the sample's process list, and its figures. Only allocated, reserved, inactive
/// split, allocation retries and OOMs are recorded (the memory fraction and the allocator
/// configuration are not).
pub(crate) type TorchEntry = (u32, TorchMem);

/// Encodes one sample: the devices' readings and the processes' memory by session-local id
/// (no PyTorch figures: the bytes a version 1 writer wrote).
pub fn encode_sample(
    out: &mut Vec<u8>,
    unix_ms: UnixMs,
    devices: &[DeviceSample],
    procs: &[ProcEntry],
) {
    encode_sample_with_torch(out, unix_ms, devices, procs, &[]);
}

/// Encodes one sample with the PyTorch figures of some of its processes (`torch`, by position
/// in `procs`, in increasing order). With no figures the payload is exactly a version 1 one;
/// otherwise the torch section follows the processes:
///
/// ```text
/// torch_section := n:varint torch{n}        (only when some process has figures)
/// torch         := position:varint present:u8 [allocated reserved inactive_split: varint
///                  bytes] [alloc_retries:varint] [ooms:varint]   (each present per bit 0..4)
/// ```
pub fn encode_sample_with_torch(
    out: &mut Vec<u8>,
    unix_ms: UnixMs,
    devices: &[DeviceSample],
    procs: &[ProcEntry],
    torch: &[TorchEntry],
) {
    put_varint(out, unix_ms.max(0) as u64);
    put_varint(out, devices.len() as u64);
    for d in devices {
        put_device(out, d);
    }
    put_varint(out, procs.len() as u64);
    for (id, used) in procs {
        put_varint(out, u64::from(*id));
        put_proc_used(out, *used);
    }
    if torch.is_empty() {
        return;
    }
    put_varint(out, torch.len() as u64);
    for (pos, t) in torch {
        put_torch(out, *pos, t);
    }
}

/// Encodes one device reading: its index, the `present` byte, then the fields it marks (memory
/// in KiB, utilisation, temperature, power, and the version 2 `extra` byte and its fields).
fn put_device(out: &mut Vec<u8>, d: &DeviceSample) {
    put_varint(out, u64::from(d.index));
    let kib = [
        d.memory_total_bytes,
        d.memory_used_bytes,
        d.memory_reserved_bytes,
        d.memory_free_bytes,
    ];
    let extra = device_extra_bits(d);
    out.push(device_present_bits(d, &kib, extra));
    for v in kib.into_iter().flatten() {
        // Bytes are kept exactly when KiB-aligned (always, for NVML); else rounded down.
        put_varint(out, v >> 10);
    }
    if let Some(u) = d.utilization_gpu_pct {
        out.push(u.min(255) as u8);
    }
    if let Some(t) = d.temperature_c {
        out.push(t.min(255) as u8);
    }
    if let Some(p) = d.power_w {
        // Milliwatts, as NVML reports them.
        put_varint(out, (p.max(0.0) * 1000.0).round() as u64);
    }
    if extra != 0 {
        out.push(extra);
        put_device_extras(out, d);
    }
}

/// A device's `present` byte: bits 0..3 the memory figures (`kib`), 4 utilisation,
/// 5 temperature, 6 power, 7 an `extra` byte follows (`extra` is not 0).
fn device_present_bits(d: &DeviceSample, kib: &[Option<u64>; 4], extra: u8) -> u8 {
    let mut present = 0u8;
    for (i, v) in kib.iter().enumerate() {
        if v.is_some() {
            present |= 1 << i;
        }
    }
    if d.utilization_gpu_pct.is_some() {
        present |= 1 << 4;
    }
    if d.temperature_c.is_some() {
        present |= 1 << 5;
    }
    if d.power_w.is_some() {
        present |= 1 << 6;
    }
    if extra != 0 {
        present |= 1 << 7;
    }
    present
}

/// A device's version 2 `extra` byte: bits 0..5 the power cap, SM clock, memory clock, fan,
/// and the forecast's likely and earliest time to full (0: no extra byte is written).
fn device_extra_bits(d: &DeviceSample) -> u8 {
    let mut extra = 0u8;
    for (i, set) in [
        d.power_limit_w.is_some(),
        d.sm_clock_mhz.is_some(),
        d.mem_clock_mhz.is_some(),
        d.fan_pct.is_some(),
        forecast(d.time_to_full_s).is_some(),
        forecast(d.time_to_full_earliest_s).is_some(),
    ]
    .into_iter()
    .enumerate()
    {
        if set {
            extra |= 1 << i;
        }
    }
    extra
}

/// Encodes the fields a device's `extra` byte marks: the power cap (mW), the clocks (MHz), the
/// fan (%) and the forecast's seconds (8 bytes each).
fn put_device_extras(out: &mut Vec<u8>, d: &DeviceSample) {
    if let Some(p) = d.power_limit_w {
        put_varint(out, (p.max(0.0) * 1000.0).round() as u64);
    }
    for v in [d.sm_clock_mhz, d.mem_clock_mhz].into_iter().flatten() {
        put_varint(out, u64::from(v));
    }
    if let Some(f) = d.fan_pct {
        out.push(f.min(255) as u8);
    }
    for s in [
        forecast(d.time_to_full_s),
        forecast(d.time_to_full_earliest_s),
    ]
    .into_iter()
    .flatten()
    {
        out.extend_from_slice(&s.to_le_bytes());
    }
}

/// Encodes one torch entry: the process's position, the `present` byte, and the figures it
/// marks (allocated, reserved and inactive split always; retries and OOMs when not 0).
fn put_torch(out: &mut Vec<u8>, pos: u32, t: &TorchMem) {
    put_varint(out, u64::from(pos));
    let mut present = 0b111u8;
    if t.alloc_retries > 0 {
        present |= 1 << 3;
    }
    if t.ooms > 0 {
        present |= 1 << 4;
    }
    out.push(present);
    put_varint(out, t.allocated_bytes);
    put_varint(out, t.reserved_bytes);
    put_varint(out, t.inactive_split_bytes);
    if t.alloc_retries > 0 {
        put_varint(out, t.alloc_retries);
    }
    if t.ooms > 0 {
        put_varint(out, t.ooms);
    }
}

/// Bits of a torch entry's `present` byte this build knows (an entry with others is malformed:
/// their lengths are unknown).
const TORCH_PRESENT_KNOWN: u8 = 0b1_1111;

/// One torch entry of a sample (see [`encode_sample_with_torch`]).
fn get_torch(buf: &[u8], pos: &mut usize) -> Option<TorchEntry> {
    let position = u32::try_from(get_varint(buf, pos)?).ok()?;
    let present = *buf.get(*pos)?;
    *pos += 1;
    if present & !TORCH_PRESENT_KNOWN != 0 {
        return None;
    }
    let mut v = [0u64; 5];
    for (i, slot) in v.iter_mut().enumerate() {
        if present & (1 << i) != 0 {
            *slot = get_varint(buf, pos)?;
        }
    }
    Some((
        position,
        TorchMem {
            allocated_bytes: v[0],
            reserved_bytes: v[1],
            inactive_split_bytes: v[2],
            alloc_retries: v[3],
            ooms: v[4],
            ..TorchMem::default()
        },
    ))
}

/// A decoded sample.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct DecodedSample {
    /// Time of the sample.
    pub unix_ms: UnixMs,
    /// Device readings (uuid and name are filled in from the header by the reader).
    pub devices: Vec<DeviceSample>,
    /// Processes by session-local id.
    pub procs: Vec<ProcEntry>,
    /// PyTorch's figures of some of those processes, by position in `procs` (format version 2;
    /// empty in version 1 samples and where no companion answered).
    pub torch: Vec<TorchEntry>,
}

/// Decodes a sample payload; `None` if it is malformed.
pub fn decode_sample(buf: &[u8]) -> Option<DecodedSample> {
    let mut devices = Vec::new();
    let mut procs = Vec::new();
    let mut torch = Vec::new();
    let unix_ms = walk_sample(
        buf,
        |d| devices.push(d),
        |p| procs.push(p),
        |t| torch.push(t),
    )?;
    Some(DecodedSample {
        unix_ms,
        devices,
        procs,
        torch,
    })
}

/// Checks a sample payload without keeping it: its time if it decodes (exactly when
/// [`decode_sample`] would), calling `on_proc` with every session-local process id.
pub(crate) fn check_sample(buf: &[u8], mut on_proc: impl FnMut(u32)) -> Option<UnixMs> {
    walk_sample(buf, |_| {}, |(id, _)| on_proc(id), |_| {})
}

/// Walks a sample payload, calling `on_device` per device reading and `on_proc` per process
/// id (as [`check_sample`] does, without keeping anything); the time if it is well formed.
pub(crate) fn walk_shape(
    buf: &[u8],
    mut on_device: impl FnMut(),
    mut on_proc: impl FnMut(u32),
) -> Option<UnixMs> {
    walk_sample(buf, |_| on_device(), |(id, _)| on_proc(id), |_| {})
}

/// Decodes a sample payload, handing each device and process to the callbacks; the time if the
/// whole payload is well formed.
pub(crate) fn walk_sample(
    buf: &[u8],
    mut on_device: impl FnMut(DeviceSample),
    mut on_proc: impl FnMut(ProcEntry),
    mut on_torch: impl FnMut(TorchEntry),
) -> Option<UnixMs> {
    let mut pos = 0;
    let unix_ms = i64::try_from(get_varint(buf, &mut pos)?).ok()?;
    let n_dev = get_varint(buf, &mut pos)?;
    if n_dev > u64::from(MAX_DEVICE_INDEX) + 1 {
        return None;
    }
    // A device index at most once per sample: a crafted sample that names one device 4096
    // times would have every copy take that device's name from the header.
    let mut seen = [0u64; (MAX_DEVICE_INDEX as usize + 1) / 64];
    for _ in 0..n_dev {
        let d = get_device(buf, &mut pos)?;
        let (word, bit) = ((d.index / 64) as usize, d.index % 64);
        let w = seen.get_mut(word)?;
        if *w & (1 << bit) != 0 {
            return None;
        }
        *w |= 1 << bit;
        on_device(d);
    }
    let n_proc = get_varint(buf, &mut pos)?;
    if n_proc > buf.len() as u64 {
        return None;
    }
    for _ in 0..n_proc {
        let id = u32::try_from(get_varint(buf, &mut pos)?).ok()?;
        on_proc((id, get_proc_used(buf, &mut pos)?));
    }
    if pos < buf.len() {
        // Version 2: PyTorch's figures, by increasing position among the processes above.
        let n_torch = get_varint(buf, &mut pos)?;
        if n_torch == 0 || n_torch > n_proc {
            return None;
        }
        let mut next = 0u64;
        for _ in 0..n_torch {
            let t = get_torch(buf, &mut pos)?;
            if u64::from(t.0) < next || u64::from(t.0) >= n_proc {
                return None;
            }
            next = u64::from(t.0) + 1;
            on_torch(t);
        }
    }
    (pos == buf.len()).then_some(unix_ms)
}

/// One device reading of a sample.
fn get_device(buf: &[u8], pos: &mut usize) -> Option<DeviceSample> {
    let index = u32::try_from(get_varint(buf, pos)?).ok()?;
    if index > MAX_DEVICE_INDEX {
        return None;
    }
    let present = *buf.get(*pos)?;
    *pos += 1;
    let mut kib = [None; 4];
    for (i, slot) in kib.iter_mut().enumerate() {
        if present & (1 << i) != 0 {
            *slot = Some(get_varint(buf, pos)?.checked_mul(1024)?);
        }
    }
    let mut d = DeviceSample {
        index,
        memory_total_bytes: kib[0],
        memory_used_bytes: kib[1],
        memory_reserved_bytes: kib[2],
        memory_free_bytes: kib[3],
        ..DeviceSample::default()
    };
    if present & (1 << 4) != 0 {
        d.utilization_gpu_pct = Some(u32::from(*buf.get(*pos)?));
        *pos += 1;
    }
    if present & (1 << 5) != 0 {
        d.temperature_c = Some(u32::from(*buf.get(*pos)?));
        *pos += 1;
    }
    if present & (1 << 6) != 0 {
        d.power_w = Some(get_varint(buf, pos)? as f64 / 1000.0);
    }
    if present & (1 << 7) != 0 {
        get_device_extras(buf, pos, &mut d)?;
    }
    Some(d)
}

/// Reads a device's version 2 `extra` byte and the fields it marks into `d`; `None` when cut
/// short or malformed (an unknown bit).
fn get_device_extras(buf: &[u8], pos: &mut usize, d: &mut DeviceSample) -> Option<()> {
    // Version 2: power cap (mW), SM and memory clocks (MHz), fan (%), per bit 0..3.
    let extra = *buf.get(*pos)?;
    *pos += 1;
    if extra & !0b11_1111 != 0 {
        return None;
    }
    if extra & 1 != 0 {
        d.power_limit_w = Some(get_varint(buf, pos)? as f64 / 1000.0);
    }
    if extra & 2 != 0 {
        d.sm_clock_mhz = Some(u32::try_from(get_varint(buf, pos)?).ok()?);
    }
    if extra & 4 != 0 {
        d.mem_clock_mhz = Some(u32::try_from(get_varint(buf, pos)?).ok()?);
    }
    if extra & 8 != 0 {
        d.fan_pct = Some(u32::from(*buf.get(*pos)?));
        *pos += 1;
    }
    // Version 4: the forecast's likely and earliest time to full (s), per bit 4..5.
    if extra & 16 != 0 {
        d.time_to_full_s = Some(get_seconds(buf, pos)?);
    }
    if extra & 32 != 0 {
        d.time_to_full_earliest_s = Some(get_seconds(buf, pos)?);
    }
    Some(())
}

/// A forecast's seconds as written: a finite, non-negative figure (any other is left out).
fn forecast(s: Option<f64>) -> Option<f64> {
    s.filter(|s| s.is_finite() && *s >= 0.0)
}

/// Seconds as an `f64` (8 bytes, little-endian) at `*pos`; `None` when cut short, not finite
/// or negative.
fn get_seconds(buf: &[u8], pos: &mut usize) -> Option<f64> {
    let bytes: [u8; 8] = buf.get(*pos..*pos + 8)?.try_into().ok()?;
    *pos += 8;
    forecast(Some(f64::from_le_bytes(bytes)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_round_trip() {
        for v in [
            0u64,
            1,
            127,
            128,
            300,
            16_383,
            16_384,
            (1 << 21) - 1,
            1 << 21,
            1 << 35,
            u64::MAX,
        ] {
            let mut b = Vec::new();
            put_varint(&mut b, v);
            let mut p = 0;
            assert_eq!(get_varint(&b, &mut p), Some(v));
            assert_eq!(p, b.len());
        }
        assert_eq!(get_varint(&[0x80, 0x80], &mut 0), None);
        assert_eq!(get_varint(&[0x80], &mut 0), None);
        assert_eq!(get_varint(&[0xFF, 0xFF, 0x7F], &mut 0), Some(0x1F_FFFF));
        assert_eq!(get_varint(&[0xFF, 0xFF, 0x01], &mut 0), Some(0x7FFF));
    }

    #[test]
    fn sample_round_trip_with_missing_readings() {
        let devs = vec![
            DeviceSample {
                index: 0,
                memory_total_bytes: Some(150_754_820_096),
                memory_used_bytes: Some(8_925_478_912),
                memory_reserved_bytes: Some(644_939_776),
                memory_free_bytes: Some(141_184_401_408),
                utilization_gpu_pct: Some(97),
                temperature_c: Some(41),
                power_w: Some(312.4),
                power_limit_w: Some(700.0),
                sm_clock_mhz: Some(1980),
                mem_clock_mhz: Some(3201),
                fan_pct: Some(47),
                ..DeviceSample::default()
            },
            DeviceSample {
                index: 2,
                sm_clock_mhz: Some(345),
                ..DeviceSample::default()
            },
            DeviceSample {
                index: 1,
                ..DeviceSample::default()
            },
        ];
        let procs = vec![(0, Some(8192 << 20)), (1, None), (2, Some(5 << 10))];
        let mut buf = Vec::new();
        encode_sample(&mut buf, 1_796_204_444_138, &devs, &procs);
        let d = decode_sample(&buf).expect("decodes");
        assert_eq!(d.unix_ms, 1_796_204_444_138);
        assert_eq!(d.devices, devs);
        assert_eq!(d.procs, procs);
        assert!(decode_sample(&buf[..buf.len() - 1]).is_none());
    }

    #[test]
    fn torch_figures_round_trip_and_a_version_1_sample_is_unchanged() {
        let procs = vec![(0, Some(8192 << 20)), (1, None), (2, Some(5 << 20))];
        let t = |a: u64, r: u64, i: u64, retries: u64, ooms: u64| TorchMem {
            allocated_bytes: a,
            reserved_bytes: r,
            inactive_split_bytes: i,
            alloc_retries: retries,
            ooms,
            ..TorchMem::default()
        };
        let torch = vec![
            (0, t(1_918_238_720, 127_104_040_960, 20_971_520, 0, 0)),
            (2, t(512, 2 << 20, 0, 3, 1)),
        ];
        let mut buf = Vec::new();
        encode_sample_with_torch(&mut buf, 7_000, &[], &procs, &torch);
        let d = decode_sample(&buf).expect("decodes");
        assert_eq!(d.procs, procs);
        assert_eq!(d.torch, torch);
        let mut seen = Vec::new();
        assert_eq!(check_sample(&buf, |id| seen.push(id)), Some(7_000));
        assert_eq!(seen, vec![0, 1, 2]);
        // Without figures the payload is byte for byte what version 1 wrote.
        let (mut v1, mut v2) = (Vec::new(), Vec::new());
        encode_sample(&mut v1, 7_000, &[], &procs);
        encode_sample_with_torch(&mut v2, 7_000, &[], &procs, &[]);
        assert_eq!(v1, v2);
        assert!(decode_sample(&v1).expect("decodes").torch.is_empty());
        // A cut-off torch section, a position out of range or repeated, or an unknown bit:
        // malformed, never a panic.
        assert!(decode_sample(&buf[..buf.len() - 1]).is_none());
        for bad in [
            vec![(3, t(1, 2, 0, 0, 0))],
            vec![(1, t(1, 2, 0, 0, 0)), (1, t(1, 2, 0, 0, 0))],
        ] {
            let mut b = Vec::new();
            encode_sample_with_torch(&mut b, 7_000, &[], &procs, &bad);
            assert!(decode_sample(&b).is_none());
        }
        let mut b = Vec::new();
        encode_sample_with_torch(&mut b, 7_000, &[], &procs, &[(0, t(1, 2, 0, 0, 0))]);
        let present_at = b.len() - 4;
        assert_eq!(b[present_at], 0b111);
        b[present_at] |= 1 << 6;
        assert!(decode_sample(&b).is_none());
    }

    #[test]
    fn frames_reject_any_flipped_bit() {
        let rec = frame(KIND_EVENT, b"{\"kind\":\"x\"}");
        assert!(read_record(&rec, 0).is_some());
        for i in 0..rec.len() {
            for bit in 0..8 {
                let mut bad = rec.clone();
                bad[i] ^= 1 << bit;
                assert!(read_record(&bad, 0).is_none(), "byte {i} bit {bit}");
            }
        }
    }

    /// Pseudo-random bytes (a fixed LCG: the test is deterministic).
    fn noise(n: usize, seed: u64) -> Vec<u8> {
        let mut x = seed;
        (0..n)
            .map(|_| {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                (x >> 56) as u8
            })
            .collect()
    }

    #[test]
    fn crc_shift_combines_like_zlib() {
        let data = noise(70_000, 7);
        for (a, b) in [
            (0, 0),
            (0, 1),
            (3, 0),
            (5, 64),
            (100, 129),
            (1000, 69_000),
            (1, 65_536),
        ] {
            let (x, y) = data.split_at(a);
            let y = &y[..b];
            let whole = crc32fast::hash(&data[..a + b]);
            assert_eq!(
                whole,
                crc_shift(crc32fast::hash(x), b as u64) ^ crc32fast::hash(y),
                "a={a} b={b}"
            );
        }
    }

    #[test]
    fn scanner_agrees_with_read_record_everywhere() {
        // Records of every size class (direct hash and prefix-derived) amid garbage.
        let mut buf = noise(37, 1);
        for (i, len) in [0usize, 1, 60, 128, 129, 200, 5000, 70_000]
            .into_iter()
            .enumerate()
        {
            buf.extend_from_slice(&frame(KIND_EVENT, &noise(len, i as u64)));
            buf.extend_from_slice(&noise(i * 3, 99));
            buf.extend_from_slice(&frame(KIND_SAMPLE, &noise(len / 2, i as u64 + 50)));
        }
        let mut sc = Scanner::new(&buf);
        let mut found = 0;
        for pos in 0..buf.len() {
            let want = read_record(&buf, pos);
            assert_eq!(sc.read_at(pos), want, "at {pos}");
            found += usize::from(want.is_some());
        }
        assert_eq!(found, 16);
        // Flipped bits are caught the same way.
        let rec = frame(KIND_HEADER, &noise(300, 5));
        for i in 0..rec.len() {
            let mut bad = rec.clone();
            bad[i] ^= 0x10;
            assert!(Scanner::new(&bad).read_at(0).is_none(), "byte {i}");
        }
    }

    #[test]
    fn lengths_past_the_end_or_the_limit_are_rejected_before_hashing() {
        // Claims 16 MiB (the limit) with 1 KiB behind it; then 16 MiB + 1 with enough behind.
        let mut short = vec![0xA5, 0x57, KIND_SAMPLE, 0x80, 0x80, 0x80, 0x08];
        short.extend_from_slice(&[0u8; 1024]);
        let mut sc = Scanner::new(&short);
        let base = sc.hashed_bytes();
        assert_eq!(base, short.len() as u64, "the one pass over the buffer");
        assert!(sc.read_at(0).is_none());
        assert_eq!(
            sc.hashed_bytes(),
            base,
            "no checksum of a length the buffer cannot back"
        );
        let mut over = vec![0xA5, 0x57, KIND_SAMPLE];
        put_varint(&mut over, MAX_PAYLOAD as u64 + 1);
        over.resize(over.len() + MAX_PAYLOAD + 5, 0);
        let mut sc = Scanner::new(&over);
        let base = sc.hashed_bytes();
        assert!(sc.read_at(0).is_none());
        assert_eq!(
            sc.hashed_bytes(),
            base,
            "no checksum of a length over the limit"
        );
    }

    #[test]
    fn a_long_candidate_costs_at_most_two_strides() {
        // A record marker claiming 1 MiB, backed by 1 MiB of garbage: the check fails and
        // hashes at most 2 × CRC_STRIDE bytes beyond the one pass.
        let mut buf = vec![0xA5, 0x57, KIND_EVENT];
        put_varint(&mut buf, 1 << 20);
        buf.extend_from_slice(&noise((1 << 20) + 4, 3));
        let mut sc = Scanner::new(&buf);
        let base = sc.hashed_bytes();
        assert!(sc.read_at(0).is_none());
        assert!(sc.hashed_bytes() - base <= 2 * CRC_STRIDE as u64);
    }

    #[test]
    fn device_index_over_the_limit_is_malformed() {
        let d = DeviceSample {
            index: MAX_DEVICE_INDEX + 1,
            ..DeviceSample::default()
        };
        let mut buf = Vec::new();
        encode_sample(&mut buf, 5, &[d], &[]);
        assert!(decode_sample(&buf).is_none());
        assert!(check_sample(&buf, |_| {}).is_none());
    }
}
