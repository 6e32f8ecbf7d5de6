/**
 * The Cluster hash slot of a key: CRC16 (XMODEM) of the key, or of its hash tag (between the
 * first `{` and the next `}`, when not empty), modulo 16,384, as the Redis Cluster spec says.
 *
 *   slotOf('tw:{orders:5}:meta') === slotOf('orders:5')
 */

const TABLE = (() => {
  const table = new Uint16Array(256);
  for (let byte = 0; byte < 256; byte++) {
    let crc = byte << 8;
    for (let bit = 0; bit < 8; bit++) crc = crc & 0x8000 ? (crc << 1) ^ 0x1021 : crc << 1;
    table[byte] = crc & 0xffff;
  }
  return table;
})();

export function crc16(bytes: Uint8Array): number {
  let crc = 0;
  for (const byte of bytes) crc = ((crc << 8) & 0xffff) ^ TABLE[((crc >> 8) ^ byte) & 0xff];
  return crc;
}

export function slotOf(key: string): number {
  const open = key.indexOf('{');
  if (open >= 0) {
    const close = key.indexOf('}', open + 1);
    if (close > open + 1) key = key.slice(open + 1, close);
  }
  return crc16(Buffer.from(key, 'utf8')) % 16_384;
}
