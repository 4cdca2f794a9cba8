package blob

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Sniff names the media type of a blob from its content the way the
// reference PDS does: it runs the npm file-type detector (version 22) over
// the upload stream and keeps what it finds, falling back to the declared
// Content-Type only when it finds nothing. Sniff returns "" for nothing.
//
// The stream has no known size there, so the detector sees the first bytes
// zero-padded, gives up on any read past the end, and bounds its skips.
// Sniff follows those rules for the detector's checks in the detector's
// order. Where fakepds simplifies, the difference is confined to a family
// of formats: every ZIP is application/zip (the detector tells OOXML, ODF,
// EPUB, JAR and APK apart), and ASF is application/vnd.ms-asf (the
// detector looks for audio or video streams).
func Sniff(r io.ReaderAt, size int64) string {
	d := &sniffer{r: r, size: size}
	mime, _ := d.parse(0)
	return mime
}

// Limits of the detector on a stream of unknown size.
const (
	sampleSize        = 4100     // the detector's buffer
	untrustedSkip     = 16 << 20 // largest skip driven by file content
	maxChunk          = 1 << 20  // largest PNG chunk or EBML element it skips
	maxTIFFIFDOffset  = 1 << 20
	maxReentries      = 256
	maxPNGChunks      = 512
	maxEBMLElements   = 256
	maxEBMLDocTypeLen = 64
	maxTIFFTags       = 512
)

// errEOS is a read past the end of the blob: the detector then reports
// nothing at all.
var errEOS = errors.New("blob: sniff: end of stream")

// errLimit is one of the detector's hard limits: also nothing.
var errLimit = errors.New("blob: sniff: limit")

type sniffer struct {
	r       io.ReaderAt
	size    int64
	pos     int64
	buf     [sampleSize]byte
	reentry int
}

// peek fills the start of buf with up to n bytes at pos, leaving the rest
// as it was: zeros, or what a shorter earlier peek put there.
func (d *sniffer) peek(n int) {
	avail := d.size - d.pos
	if avail <= 0 {
		return
	}
	if int64(n) > avail {
		n = int(avail)
	}
	_, _ = d.r.ReadAt(d.buf[:n], d.pos)
}

func (d *sniffer) read(n int) ([]byte, error) {
	if int64(n) > d.size-d.pos {
		d.pos = d.size
		return nil, errEOS
	}
	b := make([]byte, n)
	if _, err := d.r.ReadAt(b, d.pos); err != nil {
		return nil, errEOS
	}
	d.pos += int64(n)
	return b, nil
}

func (d *sniffer) skip(n int64) error {
	if n > d.size-d.pos {
		d.pos = d.size
		return errEOS
	}
	d.pos += n
	return nil
}

// at reports whether buf holds sig at off.
func (d *sniffer) at(off int, sig string) bool {
	return off+len(sig) <= len(d.buf) && string(d.buf[off:off+len(sig)]) == sig
}

// masked reports whether buf&mask equals want at off, byte by byte.
func (d *sniffer) masked(off int, want, mask []byte) bool {
	for i := range want {
		if want[i] != d.buf[off+i]&mask[i] {
			return false
		}
	}
	return true
}

// parse runs the confident checks, then the imprecise ones if the
// confident ones consumed nothing.
func (d *sniffer) parse(reentry int) (string, error) {
	d.reentry = reentry
	start := d.pos
	mime, err := d.confident()
	if err != nil || mime != "" {
		return mime, err
	}
	if d.pos != start {
		return "", nil
	}
	return d.imprecise()
}

// sig is a fixed signature of the confident checks.
type sig struct {
	off  int
	s    string
	mime string
}

// twoByte and the other tables are the detector's fixed signatures, in its
// order; checks that need more than a comparison run between them.
var twoByte = []sig{
	{0, "BM", "image/bmp"},
	{0, "\x0b\x77", "audio/vnd.dolby.dd-raw"},
	{0, "\x78\x01", "application/x-apple-diskimage"},
	{0, "MZ", "application/x-msdownload"},
}

var compress = []sig{
	{0, "\x1f\xa0", "application/x-compress"},
	{0, "\x1f\x9d", "application/x-compress"},
	{0, "\xc7\x71", "application/x-cpio"},
	{0, "\x60\xea", "application/x-arj"},
}

var fourByte1 = []sig{
	{0, "Obj\x01", "application/avro"},
	{0, "FLIF", "image/flif"},
	{0, "8BPS", "image/vnd.adobe.photoshop"},
	{0, "MPCK", "audio/x-musepack"},
	{0, "FORM", "audio/aiff"},
}

var fourByte2 = []sig{
	{0, "MThd", "audio/midi"},
}

var fourByte3 = []sig{
	{0, "\xd4\xc3\xb2\xa1", "application/vnd.tcpdump.pcap"},
	{0, "\xa1\xb2\xc3\xd4", "application/vnd.tcpdump.pcap"},
	{0, "DSD ", "audio/x-dsf"},
	{0, "LZIP", "application/lzip"},
	{0, "fLaC", "audio/flac"},
	{0, "BPG\xfb", "image/bpg"},
	{0, "wvpk", "audio/wavpack"},
	{0, "%PDF", "application/pdf"},
	{0, "\x00asm", "application/wasm"},
}

var fourByte4 = []sig{
	{0, "MAC ", "audio/ape"},
}

var fourByte5 = []sig{
	{0, "SQLi", "application/x-sqlite3"},
	{0, "NES\x1a", "application/x-nintendo-nes-rom"},
	{0, "Cr24", "application/x-google-chrome-extension"},
	{0, "MSCF", "application/vnd.ms-cab-compressed"},
	{0, "ISc(", "application/vnd.ms-cab-compressed"},
	{0, "\xed\xab\xee\xdb", "application/x-rpm"},
	{0, "\xc5\xd0\xd3\xc6", "application/eps"},
	{0, "\x28\xb5\x2f\xfd", "application/zstd"},
	{0, "\x7fELF", "application/x-elf"},
	{0, "!BDN", "application/vnd.ms-outlook"},
	{0, "PAR1", "application/vnd.apache.parquet"},
	{0, "PARE", "application/vnd.apache.parquet"},
	{0, "ttcf", "font/collection"},
	{0, "\xfe\xed\xfa\xce", "application/x-mach-binary"},
	{0, "\xfe\xed\xfa\xcf", "application/x-mach-binary"},
	{0, "\xce\xfa\xed\xfe", "application/x-mach-binary"},
	{0, "\xcf\xfa\xed\xfe", "application/x-mach-binary"},
	{0, "\x04\x22\x4d\x18", "application/x-lz4"},
	{0, "regf", "application/x-ft-windows-registry-hive"},
	{0, "$FL2", "application/x-spss-sav"},
	{0, "$FL3", "application/x-spss-sav"},
	{0, "OTTO\x00", "font/otf"},
	{0, "#!AMR", "audio/amr"},
	{0, `{\rtf`, "application/rtf"},
	{0, "FLV\x01", "video/x-flv"},
	{0, "IMPM", "audio/x-it"},
}

var lzhMethods = []string{"-lh0-", "-lh1-", "-lh2-", "-lh3-", "-lh4-", "-lh5-", "-lh6-", "-lh7-", "-lzs-", "-lz4-", "-lz5-", "-lhd-"}

var fiveByte = []sig{
	{0, "ITSF", "application/vnd.ms-htmlhelp"},
}

var sixByte = []sig{
	{0, ".RMF", "application/vnd.rn-realmedia"},
	{0, "DRACO", "application/x-ft-draco"},
	{0, "\xfd7zXZ\x00", "application/x-xz"},
	{0, "<?xml ", "application/xml"},
	{0, "7z\xbc\xaf\x27\x1c", "application/x-7z-compressed"},
}

var eightByte = []sig{
	{0, "ARROW1\x00\x00", "application/vnd.apache.arrow.file"},
	{0, "glTF\x02\x00\x00\x00", "model/gltf-binary"},
	{4, "free", "video/quicktime"},
	{4, "mdat", "video/quicktime"},
	{4, "moov", "video/quicktime"},
	{4, "wide", "video/quicktime"},
	{0, "IIRO\x08\x00\x00\x00\x18", "image/x-olympus-orf"},
	{0, "gimp xcf ", "image/x-xcf"},
}

var twelveByte = []sig{
	{0, "IIU\x00\x18\x00\x00\x00\x88\xe7\x74\xd8", "image/x-panasonic-rw2"},
}

var twelveByte2 = []sig{
	{0, "\xabKTX 11\xbb\r\n\x1a\n", "image/ktx"},
}

var twelveByte3 = []sig{
	{2, "\x27\x0a\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00", "application/x-esri-shape"},
	{0, "\xff\x4f\xff\x51", "image/j2c"},
}

var sixteenByte = []sig{
	{0, "FUJIFILMCCD-RAW", "image/x-fujifilm-raf"},
	{0, "Extended Module:", "audio/x-xm"},
	{0, "Creative Voice File", "audio/x-voc"},
}

var sixteenByte2 = []sig{
	{0, "\x06\x0e\x2b\x34\x02\x05\x01\x01\x0d\x01\x02\x01\x01\x02", "application/mxf"},
	{44, "SCRM", "audio/x-s3m"},
}

var sixteenByte3 = []sig{
	{60, "BOOKMOBI", "application/x-mobipocket-ebook"},
	{128, "DICM", "application/dicom"},
	{0, "L\x00\x00\x00\x01\x14\x02\x00\x00\x00\x00\x00\xc0\x00\x00\x00\x00\x00\x00F", "application/x-ms-shortcut"},
	{0, "book\x00\x00\x00\x00mark\x00\x00\x00\x00", "application/x-ft-apple.alias"},
	{0, "Kaydara FBX Binary  \x00", "application/x-ft-fbx"},
}

var sixteenByte4 = []sig{
	{0, "\x06\x06\xed\xf5\xd8\x1d\x46\xe5\xbd\x31\xef\xe7\xfe\x74\xb7\x1d", "application/x-indesign"},
	{0, "\xff\xff\x00\x00\x07\x00\x00\x00\x04\x00\x00\x00\x01\x00\x01\x00", "application/x-jmp-data"},
	{0, "\x00\x00\xff\xff\x00\x00\x00\x07\x00\x00\x00\x04\x00\x01\x00\x01", "application/x-jmp-data"},
}

func (d *sniffer) match(table []sig) string {
	for _, s := range table {
		if d.at(s.off, s.s) {
			return s.mime
		}
	}
	return ""
}

// confident is the detector's first pass: signatures that identify a
// format with little doubt.
func (d *sniffer) confident() (string, error) {
	d.buf = [sampleSize]byte{}
	d.peek(3)
	if d.at(0, "\x1f\x8b\x08") {
		return "application/gzip", nil
	}
	d.peek(32)
	if m := d.match(twoByte); m != "" {
		return m, nil
	}
	if d.at(0, "%!") {
		d.peek(24)
		if d.at(2, "PS-Adobe-") && d.at(14, " EPSF-") {
			return "application/eps", nil
		}
		return "application/postscript", nil
	}
	if m := d.match(compress); m != "" {
		return m, nil
	}
	if d.at(0, "\xef\xbb\xbf") { // a UTF-8 byte order mark: look past it
		if d.reentry >= maxReentries {
			return "", nil
		}
		d.reentry++
		if err := d.skip(3); err != nil {
			return "", err
		}
		return d.confident()
	}
	switch {
	case d.at(0, "GIF"):
		return "image/gif", nil
	case d.at(0, "II\xbc"):
		return "image/vnd.ms-photo", nil
	case d.at(0, "BZh"):
		return "application/x-bzip2", nil
	case d.at(0, "ID3"):
		return d.id3()
	case d.at(0, "MP+"):
		return "audio/x-musepack", nil
	case (d.buf[0] == 'C' || d.buf[0] == 'F') && d.at(1, "WS"):
		return "application/x-shockwave-flash", nil
	case d.at(0, "\xff\xd8\xff"):
		if d.buf[3] == 0xf7 {
			return "image/jls", nil
		}
		return "image/jpeg", nil
	}
	if m := d.match(fourByte1); m != "" {
		return m, nil
	}
	switch {
	case d.at(0, "caff\x00\x01") && d.at(8, "desc"):
		return "audio/x-caf", nil
	case d.at(0, "icns"):
		return "image/icns", nil
	case d.at(0, "PK\x03\x04"):
		return "application/zip", nil
	case d.at(0, "OggS"):
		return d.ogg()
	case d.at(0, "PK") && (d.buf[2] == 3 || d.buf[2] == 5 || d.buf[2] == 7) && (d.buf[3] == 4 || d.buf[3] == 6 || d.buf[3] == 8):
		return "application/zip", nil
	}
	if m := d.match(fourByte2); m != "" {
		return m, nil
	}
	switch {
	case d.at(0, "wOFF") && (d.at(4, "\x00\x01\x00\x00") || d.at(4, "OTTO")):
		return "font/woff", nil
	case d.at(0, "wOF2") && (d.at(4, "\x00\x01\x00\x00") || d.at(4, "OTTO")):
		return "font/woff2", nil
	}
	if m := d.match(fourByte3); m != "" {
		return m, nil
	}
	if d.at(0, "II") {
		if m, err := d.tiff(binary.LittleEndian); m != "" || err != nil {
			return m, err
		}
	}
	if d.at(0, "MM") {
		if m, err := d.tiff(binary.BigEndian); m != "" || err != nil {
			return m, err
		}
	}
	if m := d.match(fourByte4); m != "" {
		return m, nil
	}
	if d.at(0, "\x1a\x45\xdf\xa3") {
		return d.ebml()
	}
	if m := d.match(fourByte5); m != "" {
		return m, nil
	}
	for _, m := range lzhMethods {
		if d.at(2, m) {
			return "application/x-lzh-compressed", nil
		}
	}
	if d.at(0, "\x00\x00\x01\xba") {
		if d.masked(4, []byte{0x21}, []byte{0xf1}) {
			return "video/MP1S", nil
		}
		if d.masked(4, []byte{0x44}, []byte{0xc4}) {
			return "video/MP2P", nil
		}
	}
	if m := d.match(fiveByte); m != "" {
		return m, nil
	}
	if d.at(0, "\xca\xfe\xba\xbe") {
		if n := binary.BigEndian.Uint32(d.buf[4:]); n > 0 && n <= 30 {
			return "application/x-mach-binary", nil
		}
		if binary.BigEndian.Uint16(d.buf[6:]) > 30 {
			return "application/java-vm", nil
		}
	}
	if m := d.match(sixByte); m != "" {
		return m, nil
	}
	switch {
	case d.at(0, "Rar!\x1a\x07") && (d.buf[6] == 0 || d.buf[6] == 1):
		return "application/x-rar-compressed", nil
	case d.at(0, "solid "):
		return "model/stl", nil
	case d.at(0, "AC") && dwgVersion(d.buf[2:6]):
		return "image/vnd.dwg", nil
	case d.at(0, "070707"):
		return "application/x-cpio", nil
	case d.at(0, "BLENDER"):
		return "application/x-blender", nil
	case d.at(0, "!<arch>"):
		if err := d.skip(8); err != nil {
			return "", err
		}
		b, err := d.read(13)
		if err != nil {
			return "", err
		}
		if string(b) == "debian-binary" {
			return "application/x-deb", nil
		}
		return "application/x-unix-archive", nil
	case d.at(0, "WEBVTT") && strings.IndexByte("\n\r\t \x00", d.buf[6]) >= 0:
		return "text/vtt", nil
	case d.at(0, "\x89PNG\r\n\x1a\n"):
		return d.png()
	}
	if m := d.match(eightByte); m != "" {
		return m, nil
	}
	if d.at(4, "ftyp") && d.buf[8]&0x60 != 0 {
		return ftypBrand(d.buf[8:12]), nil
	}
	if d.at(0, "REGEDIT4\r\n") {
		return "application/x-ms-regedit", nil
	}
	if d.at(0, "RIFF") {
		switch {
		case d.at(8, "WEBP"):
			return "image/webp", nil
		case d.at(8, "AVI"):
			return "video/vnd.avi", nil
		case d.at(8, "WAVE"):
			return "audio/wav", nil
		case d.at(8, "QLCM"):
			return "audio/qcelp", nil
		}
	}
	if m := d.match(twelveByte); m != "" {
		return m, nil
	}
	if d.at(0, "\x30\x26\xb2\x75\x8e\x66\xcf\x11\xa6\xd9") {
		return "application/vnd.ms-asf", nil
	}
	if m := d.match(twelveByte2); m != "" {
		return m, nil
	}
	if (d.at(0, "\x7e\x10\x04") || d.at(0, "\x7e\x18\x04")) && d.at(4, "0MIE") {
		return "application/x-mie", nil
	}
	if m := d.match(twelveByte3); m != "" {
		return m, nil
	}
	if d.at(0, "\x00\x00\x00\x0cjP  \r\n\x87\n") {
		if err := d.skip(20); err != nil {
			return "", err
		}
		b, err := d.read(4)
		if err != nil {
			return "", err
		}
		switch string(b) {
		case "jp2 ":
			return "image/jp2", nil
		case "jpx ":
			return "image/jpx", nil
		case "jpm ":
			return "image/jpm", nil
		case "mjp2":
			return "image/mj2", nil
		}
		return "", nil
	}
	if d.at(0, "\xff\x0a") || d.at(0, "\x00\x00\x00\x0cJXL \r\n\x87\n") {
		return "image/jxl", nil
	}
	if d.at(0, "\xfe\xff") { // UTF-16 big-endian byte order mark: text
		if d.at(2, utf16("<?xml ", binary.BigEndian)) {
			return "application/xml", nil
		}
		return "", nil
	}
	switch {
	case d.at(0, "\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"):
		return "application/x-cfb", nil
	case d.at(0, "FRM8") && d.at(12, "DSD "):
		return "audio/x-dff", nil
	}
	d.peek(256)
	switch {
	case d.at(36, "acsp"):
		return "application/vnd.iccprofile", nil
	case d.at(7, "**ACE") && d.at(12, "**"):
		return "application/x-ace-compressed", nil
	case d.at(0, "BEGIN:") && d.at(6, "VCARD"):
		return "text/vcard", nil
	case d.at(0, "BEGIN:") && d.at(6, "VCALENDAR"):
		return "text/calendar", nil
	}
	if m := d.match(sixteenByte); m != "" {
		return m, nil
	}
	if d.at(0, "\x04\x00\x00\x00") && d.asar() {
		return "application/x-asar", nil
	}
	if m := d.match(sixteenByte2); m != "" {
		return m, nil
	}
	if d.buf[0] == 0x47 && d.buf[188] == 0x47 || d.buf[4] == 0x47 && d.buf[196] == 0x47 {
		return "video/mp2t", nil
	}
	if m := d.match(sixteenByte3); m != "" {
		return m, nil
	}
	if d.at(34, "LP") && (d.at(8, "\x00\x00\x01") || d.at(8, "\x01\x00\x02") || d.at(8, "\x02\x00\x02")) {
		return "application/vnd.ms-fontobject", nil
	}
	if m := d.match(sixteenByte4); m != "" {
		return m, nil
	}
	d.peek(512)
	if d.at(257, "ustar") && (d.buf[262] == 0 || d.buf[262] == ' ') ||
		d.at(257, "\x00\x00\x00\x00\x00\x00") && tarChecksumMatches(d.buf[:512]) {
		return "application/x-tar", nil
	}
	if d.at(0, "\xff\xfe") { // UTF-16 little-endian byte order mark: text
		switch {
		case d.at(2, utf16("<?xml ", binary.LittleEndian)):
			return "application/xml", nil
		case d.at(2, "\xff\x0e") && d.at(4, utf16("SketchUp Model", binary.LittleEndian)):
			return "application/vnd.sketchup.skp", nil
		case d.at(2, utf16("Windows Registry Editor Version 5.00\r\n", binary.LittleEndian)):
			return "application/x-ms-regedit", nil
		}
		return "", nil
	}
	if d.at(0, "-----BEGIN PGP MESSAGE-----") {
		return "application/pgp-encrypted", nil
	}
	return "", nil
}

// imprecise is the detector's second pass: short signatures that may be
// chance.
func (d *sniffer) imprecise() (string, error) {
	d.buf = [sampleSize]byte{}
	d.peek(8)
	switch {
	case d.at(0, "\x00\x00\x01\xba"), d.at(0, "\x00\x00\x01\xb3"):
		return "video/mpeg", nil
	case d.at(0, "\x00\x01\x00\x00\x00"):
		return "font/ttf", nil
	case d.at(0, "\x00\x00\x01\x00"), d.at(0, "\x00\x00\x02\x00"):
		return "image/x-icon", nil
	}
	d.peek(4)
	return d.mpegFrame(), nil
}

// mpegFrame checks for an MPEG audio frame header (or ADTS) at offset 0.
func (d *sniffer) mpegFrame() string {
	b := d.buf[:4]
	if b[0] != 0xff || b[1]&0xe0 != 0xe0 {
		return ""
	}
	if b[1]&0x16 == 0x10 {
		return "audio/aac"
	}
	switch {
	case b[1] == 0xfe: // also a UTF-16 little-endian byte order mark
		return ""
	case b[1]&0x18 == 0x08, b[2]&0xf0 == 0xf0, b[2]&0x0c == 0x0c:
		return ""
	}
	switch b[1] & 0x06 {
	case 0x02, 0x04, 0x06:
		return "audio/mpeg"
	}
	return ""
}

// id3 skips an ID3v2 tag and detects what follows it.
func (d *sniffer) id3() (string, error) {
	if err := d.skip(6); err != nil {
		return "", err
	}
	b, err := d.read(4)
	if err != nil {
		return "", err
	}
	n := int64(b[3]&0x7f) | int64(b[2]&0x7f)<<7 | int64(b[1]&0x7f)<<14 | int64(b[0]&0x7f)<<21
	if n > untrustedSkip || d.pos+n > untrustedSkip {
		return "", nil
	}
	if err := d.skip(n); err != nil {
		return "", err
	}
	if d.reentry >= maxReentries {
		return "", nil
	}
	return d.parse(d.reentry + 1)
}

func (d *sniffer) ogg() (string, error) {
	if err := d.skip(28); err != nil {
		return "", err
	}
	t, err := d.read(8)
	if err != nil {
		return "", err
	}
	has := func(p string) bool { return bytes.HasPrefix(t, []byte(p)) }
	switch {
	case has("OpusHead"):
		return "audio/ogg; codecs=opus", nil
	case has("\x80theora"), has("\x01video\x00"):
		return "video/ogg", nil
	case has("\x7fFLAC"), has("Speex  "), has("\x01vorbis"):
		return "audio/ogg", nil
	}
	return "application/ogg", nil
}

// png walks the chunks to the first image data: an animation control
// chunk before it makes an APNG.
func (d *sniffer) png() (string, error) {
	if err := d.skip(8); err != nil {
		return "", err
	}
	start := d.pos
	ihdr := false
	for range maxPNGChunks {
		if d.pos-start > untrustedSkip {
			break
		}
		prev := d.pos
		h, err := d.read(8)
		if err != nil {
			return "", err
		}
		length := int32(binary.BigEndian.Uint32(h))
		typ := string(h[4:8])
		if length < 0 {
			return "", nil
		}
		if typ == "IHDR" {
			if length != 13 {
				return "", nil
			}
			ihdr = true
		}
		switch typ {
		case "IDAT":
			return "image/png", nil
		case "acTL":
			return "image/apng", nil
		}
		if !ihdr && typ != "CgBI" {
			return "", nil
		}
		if length > maxChunk {
			if ihdr && typ[0]&0x20 != 0 { // ancillary
				return "image/png", nil
			}
			return "", nil
		}
		if err := d.skip(int64(length) + 4); err != nil {
			return "", err
		}
		if d.pos <= prev {
			break
		}
	}
	return "image/png", nil
}

// ebml reads the EBML header for its DocType: WebM or Matroska.
func (d *sniffer) ebml() (string, error) {
	_, rootLen, err := d.ebmlElement(-1)
	if err != nil {
		return "", err
	}
	remaining := rootLen
	for n := 0; remaining > 0; n++ {
		if n >= maxEBMLElements {
			return "", nil
		}
		before := d.pos
		id, length, err := d.ebmlElement(remaining)
		if err != nil {
			return "", err
		}
		remaining -= d.pos - before
		if id == 0x4282 {
			if length > maxEBMLDocTypeLen || length > remaining {
				return "", nil
			}
			b, err := d.read(int(length))
			if err != nil {
				return "", err
			}
			doc, _, _ := strings.Cut(string(b), "\x00")
			switch doc {
			case "webm":
				return "video/webm", nil
			case "matroska":
				return "video/matroska", nil
			}
			return "", nil
		}
		if length < 0 || length > maxChunk || length > remaining {
			return "", nil
		}
		if err := d.skip(length); err != nil {
			return "", err
		}
		remaining -= length
		if d.pos <= before {
			return "", nil
		}
	}
	return "", nil
}

// ebmlElement reads an element's ID and size (variable-length integers),
// within limit bytes when limit >= 0.
func (d *sniffer) ebmlElement(limit int64) (id, length int64, err error) {
	field := func() ([]byte, error) {
		if d.pos >= d.size {
			return nil, errEOS
		}
		var first [1]byte
		_, _ = d.r.ReadAt(first[:], d.pos)
		n := 1
		for mask := byte(0x80); mask != 0 && first[0]&mask == 0; mask >>= 1 {
			n++
		}
		if limit >= 0 && int64(n) > limit {
			return nil, errLimit
		}
		if limit >= 0 {
			limit -= int64(n)
		}
		return d.read(n)
	}
	idb, err := field()
	if err != nil {
		return 0, 0, err
	}
	lb, err := field()
	if err != nil {
		return 0, 0, err
	}
	lb[0] ^= 0x80 >> (len(lb) - 1)
	if len(lb) > 6 {
		lb = lb[len(lb)-6:]
	}
	return beUint(idb), beUint(lb), nil
}

func beUint(b []byte) int64 {
	var v int64
	for _, c := range b {
		v = v<<8 | int64(c)
	}
	return v
}

// tiff reads a TIFF header (and its first directory for camera raw tags).
func (d *sniffer) tiff(order binary.ByteOrder) (string, error) {
	version := order.Uint16(d.buf[2:])
	ifd := order.Uint32(d.buf[4:])
	switch version {
	case 43:
		return "image/tiff", nil
	case 42:
	default:
		return "", nil
	}
	if ifd >= 6 {
		if d.at(8, "CR") {
			return "image/x-canon-cr2", nil
		}
		if ifd >= 8 {
			a, b := order.Uint16(d.buf[8:]), order.Uint16(d.buf[10:])
			if a == 0x1c && b == 0xfe || a == 0x1f && b == 0x0b {
				return "image/x-nikon-nef", nil
			}
		}
	}
	if ifd > maxTIFFIFDOffset {
		return "image/tiff", nil
	}
	if err := d.skip(int64(ifd)); err != nil {
		return "", err
	}
	b, err := d.read(2)
	if err != nil {
		return "", err
	}
	tags := order.Uint16(b)
	if tags > maxTIFFTags {
		return "image/tiff", nil
	}
	for range tags {
		t, err := d.read(12)
		if err != nil {
			return "", err
		}
		switch order.Uint16(t) {
		case 50341:
			return "image/x-sony-arw", nil
		case 50706:
			return "image/x-adobe-dng", nil
		}
	}
	return "image/tiff", nil
}

// ftypBrand maps the major brand of an ISO base media file.
func ftypBrand(b []byte) string {
	// JavaScript's trim, not Go's: U+0085 is not whitespace there.
	brand := strings.Trim(strings.Replace(latin1(b), "\x00", " ", 1), " \t\n\v\f\r\u00a0")
	switch brand {
	case "avif", "avis":
		return "image/avif"
	case "mif1":
		return "image/heif"
	case "msf1":
		return "image/heif-sequence"
	case "heic", "heix":
		return "image/heic"
	case "hevc", "hevx":
		return "image/heic-sequence"
	case "qt":
		return "video/quicktime"
	case "M4V", "M4VH", "M4VP":
		return "video/x-m4v"
	case "M4P", "F4V", "F4P":
		return "video/mp4"
	case "M4B", "F4A", "F4B":
		return "audio/mp4"
	case "M4A":
		return "audio/x-m4a"
	case "crx":
		return "image/x-canon-cr3"
	}
	if strings.HasPrefix(brand, "3g2") {
		return "video/3gpp2"
	}
	if strings.HasPrefix(brand, "3g") {
		return "video/3gpp"
	}
	return "video/mp4"
}

func latin1(b []byte) string {
	r := make([]rune, len(b))
	for i, c := range b {
		r[i] = rune(c)
	}
	return string(r)
}

func utf16(s string, order binary.ByteOrder) string {
	b := make([]byte, 2*len(s))
	for i, c := range []byte(s) {
		order.PutUint16(b[2*i:], uint16(c))
	}
	return string(b)
}

// dwgVersion reports whether an AutoCAD "ACnnnn" version is in range.
func dwgVersion(b []byte) bool {
	for _, c := range b {
		if c < '0' || c > '9' {
			return false
		}
	}
	n, _ := strconv.Atoi(string(b))
	return n >= 1000 && n <= 1050
}

// tarChecksumMatches checks a tar header's checksum field, read the way
// JavaScript's parseInt(s, 8) reads it.
func tarChecksumMatches(h []byte) bool {
	field := string(h[148:154])
	field = strings.TrimLeft(field, " \t\n\v\f\r")
	neg := false
	if field != "" && (field[0] == '+' || field[0] == '-') {
		neg = field[0] == '-'
		field = field[1:]
	}
	n, digits := 0, 0
	for ; digits < len(field) && field[digits] >= '0' && field[digits] <= '7'; digits++ {
		n = n*8 + int(field[digits]-'0')
	}
	if digits == 0 {
		return false
	}
	if neg {
		n = -n
	}
	sum := 8 * 0x20
	for _, c := range h[:148] {
		sum += int(c)
	}
	for _, c := range h[156:512] {
		sum += int(c)
	}
	return n == sum
}

// asar recognizes an Electron archive: a pickled JSON header with files.
func (d *sniffer) asar() bool {
	n := int(binary.LittleEndian.Uint32(d.buf[12:]))
	if n <= 12 || n+16 > len(d.buf) {
		return false
	}
	raw := d.buf[16 : 16+n]
	if !utf8.Valid(raw) {
		raw = bytes.ToValidUTF8(raw, []byte("\uFFFD"))
	}
	var v map[string]any
	if json.Unmarshal(raw, &v) != nil {
		return false
	}
	return truthy(v["files"])
}

func truthy(v any) bool {
	switch x := v.(type) {
	case nil:
		return false
	case bool:
		return x
	case float64:
		return x != 0
	case string:
		return x != ""
	}
	return true
}
