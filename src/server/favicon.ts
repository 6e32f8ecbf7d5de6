/**
 * GET /favicon.ico: a 32x32 timing wheel drawn once at startup (browsers ask for it; a 404 would
 * fill the log), as an ICO holding one 32-bit BMP and an all-0 AND mask (alpha decides).
 */

const SIZE = 32;
/** An inked pixel: the dashboard's accent blue (#2563eb), as B, G, R, then alpha (opaque). */
const INK = [0xeb, 0x63, 0x25, 0xff];
/** Radii, in pixels from the centre: the ring's outer and inner edge, the hub. */
const RING_OUTER = 15;
const RING_INNER = 12;
const HUB = 4;
const SPOKES = 8;
const SPOKE_HALF_WIDTH = 1;

/** Whether the pixel at (x, y), measured from the centre, is part of the wheel. */
function inked(x: number, y: number): boolean {
  const r = Math.hypot(x, y);
  if (r > RING_OUTER) return false;
  if (r >= RING_INNER || r <= HUB) return true;
  // A line through the centre makes two spokes.
  for (let i = 0; i < SPOKES / 2; i++) {
    const angle = (i * 2 * Math.PI) / SPOKES;
    // Distance from the line through the centre at `angle`.
    if (Math.abs(x * Math.sin(angle) - y * Math.cos(angle)) <= SPOKE_HALF_WIDTH) return true;
  }
  return false;
}

export function favicon(): Buffer {
  const pixelBytes = SIZE * SIZE * 4;
  const maskBytes = SIZE * Math.ceil(SIZE / 32) * 4;
  const imageBytes = 40 + pixelBytes + maskBytes;
  const file = Buffer.alloc(6 + 16 + imageBytes);
  // ICONDIR: reserved (0), type 1 (icon), one image.
  file.writeUInt16LE(1, 2);
  file.writeUInt16LE(1, 4);
  // ICONDIRENTRY: width, height, no palette, reserved, 1 plane, 32 bits, size, offset.
  file.writeUInt8(SIZE, 6);
  file.writeUInt8(SIZE, 7);
  file.writeUInt16LE(1, 10);
  file.writeUInt16LE(32, 12);
  file.writeUInt32LE(imageBytes, 14);
  file.writeUInt32LE(22, 18);
  // BITMAPINFOHEADER: its size, width, height of pixels plus mask, 1 plane, 32 bits, no
  // compression, the size of the pixels; the rest (resolution, palette) 0.
  const header = 22;
  file.writeUInt32LE(40, header);
  file.writeInt32LE(SIZE, header + 4);
  file.writeInt32LE(2 * SIZE, header + 8);
  file.writeUInt16LE(1, header + 12);
  file.writeUInt16LE(32, header + 14);
  file.writeUInt32LE(pixelBytes, header + 20);
  const pixels = header + 40;
  const centre = (SIZE - 1) / 2;
  for (let row = 0; row < SIZE; row++) {
    const y = SIZE - 1 - row - centre; // bottom-up
    for (let column = 0; column < SIZE; column++) {
      if (!inked(column - centre, y)) continue;
      file.set(INK, pixels + (row * SIZE + column) * 4);
    }
  }
  return file;
}
