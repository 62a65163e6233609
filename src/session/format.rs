//! Record framing and the binary sample encoding (see the module docs of [`super`]).

use crate::model::{DeviceSample, UnixMs};

/// The two bytes that start every record.
pub const MAGIC: [u8; 2] = [0xA5, 0x57];
/// Header record.
pub const KIND_HEADER: u8 = 1;
/// Sample record.
pub const KIND_SAMPLE: u8 = 2;
/// Event record.
pub const KIND_EVENT: u8 = 3;
/// Largest payload a reader accepts (a guard against garbage lengths).
pub const MAX_PAYLOAD: usize = 16 << 20;

/// Appends `v` as a LEB128 varint.
pub fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Reads a varint at `*pos`, advancing it; `None` on truncation or overflow.
pub fn get_varint(buf: &[u8], pos: &mut usize) -> Option<u64> {
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
    out.extend_from_slice(&MAGIC);
    let body_start = out.len();
    out.push(kind);
    put_varint(&mut out, payload.len() as u64);
    out.extend_from_slice(payload);
    let crc = crc32fast::hash(&out[body_start..]);
    out.extend_from_slice(&crc.to_le_bytes());
    out
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

/// Tries to read a whole, checksummed record at `pos`; returns it and the position after it.
pub fn read_record(buf: &[u8], pos: usize) -> Option<(RawRecord<'_>, usize)> {
    if buf.get(pos..pos + 2)? != MAGIC {
        return None;
    }
    let body_start = pos + 2;
    let kind = *buf.get(body_start)?;
    if !(KIND_HEADER..=KIND_EVENT).contains(&kind) {
        return None;
    }
    let mut p = body_start + 1;
    let len = get_varint(buf, &mut p)? as usize;
    if len > MAX_PAYLOAD {
        return None;
    }
    let end = p.checked_add(len)?;
    let crc_bytes = buf.get(end..end + 4)?;
    let crc = u32::from_le_bytes([crc_bytes[0], crc_bytes[1], crc_bytes[2], crc_bytes[3]]);
    if crc32fast::hash(&buf[body_start..end]) != crc {
        return None;
    }
    Some((
        RawRecord {
            kind,
            payload: &buf[p..end],
            offset: pos,
        },
        end + 4,
    ))
}

/// One process entry of a sample: session-local id and memory in bytes.
pub type ProcEntry = (u32, Option<u64>);

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

/// Encodes one sample: the devices' readings and the processes' memory by session-local id.
pub fn encode_sample(
    out: &mut Vec<u8>,
    unix_ms: UnixMs,
    devices: &[DeviceSample],
    procs: &[ProcEntry],
) {
    put_varint(out, unix_ms.max(0) as u64);
    put_varint(out, devices.len() as u64);
    for d in devices {
        put_varint(out, u64::from(d.index));
        let kib = [
            d.memory_total_bytes,
            d.memory_used_bytes,
            d.memory_reserved_bytes,
            d.memory_free_bytes,
        ];
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
        out.push(present);
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
    }
    put_varint(out, procs.len() as u64);
    for (id, used) in procs {
        put_varint(out, u64::from(*id));
        put_proc_used(out, *used);
    }
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
}

/// Decodes a sample payload; `None` if it is malformed.
pub fn decode_sample(buf: &[u8]) -> Option<DecodedSample> {
    let mut pos = 0;
    let unix_ms = i64::try_from(get_varint(buf, &mut pos)?).ok()?;
    let n_dev = get_varint(buf, &mut pos)? as usize;
    if n_dev > 4096 {
        return None;
    }
    let mut devices = Vec::with_capacity(n_dev);
    for _ in 0..n_dev {
        let index = u32::try_from(get_varint(buf, &mut pos)?).ok()?;
        let present = *buf.get(pos)?;
        pos += 1;
        let mut kib = [None; 4];
        for (i, slot) in kib.iter_mut().enumerate() {
            if present & (1 << i) != 0 {
                *slot = Some(get_varint(buf, &mut pos)?.checked_mul(1024)?);
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
            d.utilization_gpu_pct = Some(u32::from(*buf.get(pos)?));
            pos += 1;
        }
        if present & (1 << 5) != 0 {
            d.temperature_c = Some(u32::from(*buf.get(pos)?));
            pos += 1;
        }
        if present & (1 << 6) != 0 {
            d.power_w = Some(get_varint(buf, &mut pos)? as f64 / 1000.0);
        }
        devices.push(d);
    }
    let n_proc = get_varint(buf, &mut pos)? as usize;
    if n_proc > buf.len() {
        return None;
    }
    let mut procs = Vec::with_capacity(n_proc);
    for _ in 0..n_proc {
        let id = u32::try_from(get_varint(buf, &mut pos)?).ok()?;
        procs.push((id, get_proc_used(buf, &mut pos)?));
    }
    (pos == buf.len()).then_some(DecodedSample {
        unix_ms,
        devices,
        procs,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_round_trip() {
        for v in [0u64, 1, 127, 128, 300, 1 << 35, u64::MAX] {
            let mut b = Vec::new();
            put_varint(&mut b, v);
            let mut p = 0;
            assert_eq!(get_varint(&b, &mut p), Some(v));
            assert_eq!(p, b.len());
        }
        assert_eq!(get_varint(&[0x80, 0x80], &mut 0), None);
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
}
