/**
 * A growable byte buffer with the primitive encodings a Parquet page needs: little-endian
 * integers (INT64 from a JS number, without BigInt), length-prefixed UTF-8, and the
 * RLE/bit-packed hybrid of levels and dictionary indexes.
 */

const INITIAL_BYTES = 64 * 1024;
const TWO_POW_32 = 4294967296;
/** An RLE run pays off from this many equal values (one bit-packed group holds 8). */
const MIN_RLE_RUN = 8;

/** A Node Buffer: its native `write` encodes UTF-8 in place about twice as fast as a JS loop. */
function allocate(size: number): { bytes: Buffer; view: DataView } {
  const bytes = Buffer.allocUnsafe(size);
  return { bytes, view: new DataView(bytes.buffer, bytes.byteOffset, bytes.length) };
}

export class ByteSink {
  bytes: Buffer;
  view: DataView;
  length = 0;

  constructor(initialBytes = INITIAL_BYTES) {
    ({ bytes: this.bytes, view: this.view } = allocate(initialBytes));
  }

  /** Makes room for `n` more bytes. */
  ensure(n: number): void {
    const need = this.length + n;
    if (need <= this.bytes.length) return;
    const grown = allocate(Math.max(need, this.bytes.length * 2));
    this.bytes.copy(grown.bytes, 0, 0, this.length);
    this.bytes = grown.bytes;
    this.view = grown.view;
  }

  reset(): void {
    this.length = 0;
  }

  /** The bytes written so far (a view: copy it before the next write if you keep it). */
  view8(): Uint8Array {
    return this.bytes.subarray(0, this.length);
  }

  u8(value: number): void {
    this.ensure(1);
    this.bytes[this.length++] = value;
  }

  u32(value: number): void {
    this.ensure(4);
    this.view.setUint32(this.length, value, true);
    this.length += 4;
  }

  i32(value: number): void {
    this.ensure(4);
    this.view.setInt32(this.length, value, true);
    this.length += 4;
  }

  /** An INT64 from a safe integer: low word by ToUint32, high word by floor division. */
  i64(value: number): void {
    this.ensure(8);
    this.view.setUint32(this.length, value >>> 0, true);
    this.view.setInt32(this.length + 4, Math.floor(value / TWO_POW_32), true);
    this.length += 8;
  }

  append(chunk: Uint8Array): void {
    this.ensure(chunk.length);
    this.bytes.set(chunk, this.length);
    this.length += chunk.length;
  }

  varint(value: number): void {
    this.ensure(5);
    let v = value;
    while (v > 0x7f) {
      this.bytes[this.length++] = (v & 0x7f) | 0x80;
      v >>>= 7;
    }
    this.bytes[this.length++] = v;
  }

  /** A PLAIN BYTE_ARRAY: 4-byte length, then the UTF-8 bytes (lone surrogates become U+FFFD). */
  string(value: string): void {
    this.ensure(4 + value.length * 3);
    const written = this.bytes.write(value, this.length + 4, 'utf8');
    this.view.setUint32(this.length, written, true);
    this.length += 4 + written;
  }

  /**
   * Appends `count` values of `values` from `start`, `bitWidth` bits each, as the RLE /
   * bit-packed hybrid (no length prefix). Runs of 8+ equal values become RLE runs; the rest are
   * bit-packed in groups of 8, the last group padded with zeros.
   */
  hybrid(values: ArrayLike<number>, start: number, count: number, bitWidth: number): void {
    const end = start + count;
    const valueBytes = (bitWidth + 7) >> 3;
    // Worst case: every group bit-packed, plus a header per group.
    this.ensure(Math.ceil(count / 8) * (bitWidth + 5) + 16);
    let i = start;
    let packedStart = -1;
    while (i < end) {
      const v = values[i]!;
      let run = 1;
      while (i + run < end && values[i + run] === v) run++;
      if (run >= MIN_RLE_RUN) {
        if (packedStart >= 0) {
          this.#bitPack(values, packedStart, i, end, bitWidth);
          packedStart = -1;
        }
        this.ensure(10 + valueBytes);
        this.varint(run * 2);
        for (let b = 0; b < valueBytes; b++) this.bytes[this.length++] = (v >>> (b * 8)) & 0xff;
        i += run;
      } else {
        if (packedStart < 0) packedStart = i;
        i += 8;
      }
    }
    if (packedStart >= 0) this.#bitPack(values, packedStart, i, end, bitWidth);
  }

  /** Bit-packs values [from, to) (to - from a multiple of 8); values at or past `end` are 0. */
  #bitPack(values: ArrayLike<number>, from: number, to: number, end: number, bitWidth: number): void {
    const groups = (to - from) >> 3;
    this.ensure(5 + groups * bitWidth);
    this.varint((groups << 1) | 1);
    const bytes = this.bytes;
    let p = this.length;
    let acc = 0;
    let bits = 0;
    for (let i = from; i < to; i++) {
      const v = i < end ? values[i]! : 0;
      acc |= v << bits;
      bits += bitWidth;
      while (bits >= 8) {
        bytes[p++] = acc & 0xff;
        acc >>>= 8;
        bits -= 8;
      }
    }
    this.length = p;
  }
}
