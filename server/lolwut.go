package server

import (
	"math"
	"math/rand/v2"
	"strings"
)

// LOLWUT [VERSION v] [version's arguments]: Redis's computer art, ported
// from src/lolwut.c, lolwut5.c and lolwut6.c of Redis 7.0. Version 5
// draws Georg Nees's Schotter in Braille characters, version 6 a skyline
// in terminal colours; any other (and LOLWUT without VERSION, as kvs
// reports a Redis 7 version) answers "Redis ver. " and the version INFO
// reports. Redis's drawings take their randomness from rand(), seeded at
// startup, so they differ from run to run; kvs draws with its own random
// numbers. The parts without randomness (Schotter's first two rows of
// squares, the canvas sizes, the arguments' checks and limits, the
// trailing lines) are Redis's byte for byte: the arithmetic is done in
// float32 where Redis's is in float.

func init() {
	registerCommands(command{name: "lolwut", arity: -1, flags: flagReadonly | flagFast, group: "server", run: runLolwut, level: 3})
	commandDocs["lolwut"] = [2]string{"Displays computer art and the Redis version", "5.0.0"}
}

func runLolwut(c *client, args [][]byte) {
	version := c.s.cfg.RedisVersion
	if len(args) >= 3 && is(args[1], "version") {
		v, ok := parseInt(args[2])
		if !ok {
			c.out = appendError(c.out, errNotInteger)
			return
		}
		// Redis formats it with %u of an unsigned int: 2^32+5 is 5.
		switch uint32(v) {
		case 5:
			version = "5.0.0"
		case 6:
			version = "6.0.0"
		default:
			version = ""
		}
		args = args[2:]
	}
	var text string
	var e string
	switch {
	case strings.HasPrefix(version, "5.") && !strings.HasPrefix(version, "5.9") || strings.HasPrefix(version, "4.9"):
		text, e = lolwut5(args[1:])
	case strings.HasPrefix(version, "6.") && !strings.HasPrefix(version, "6.9") || strings.HasPrefix(version, "5.9"):
		text, e = lolwut6(args[1:])
	default:
		text = "Redis ver. "
	}
	if e != "" {
		c.out = appendError(c.out, e)
		return
	}
	c.out = appendVerbatim(c.out, text+c.s.cfg.RedisVersion+"\n", c.proto)
}

// lolwutArgs parses up to len(defs) integer arguments over defs, with
// Redis's error, and clamps each to [1, max].
func lolwutArgs(args [][]byte, defs, maxes []int64) ([]int64, string) {
	out := append([]int64(nil), defs...)
	for i := range out {
		if i < len(args) {
			v, ok := parseInt(args[i])
			if !ok {
				return nil, errNotInteger
			}
			out[i] = v
		}
		out[i] = min(max(out[i], 1), maxes[i])
	}
	return out, ""
}

// lwCanvas is lolwut.c's canvas: one byte per pixel, a colour.
type lwCanvas struct {
	width, height int
	pixels        []byte
}

func newCanvas(width, height int, bg byte) *lwCanvas {
	c := &lwCanvas{width: width, height: height, pixels: make([]byte, width*height)}
	for i := range c.pixels {
		c.pixels[i] = bg
	}
	return c
}

func (c *lwCanvas) set(x, y int, color byte) {
	if x < 0 || x >= c.width || y < 0 || y >= c.height {
		return
	}
	c.pixels[x+y*c.width] = color
}

func (c *lwCanvas) get(x, y int) byte {
	if x < 0 || x >= c.width || y < 0 || y >= c.height {
		return 0
	}
	return c.pixels[x+y*c.width]
}

// line is Bresenham's, as lwDrawLine.
func (c *lwCanvas) line(x1, y1, x2, y2 int, color byte) {
	dx, dy := abs(x2-x1), abs(y2-y1)
	sx, sy := -1, -1
	if x1 < x2 {
		sx = 1
	}
	if y1 < y2 {
		sy = 1
	}
	err := dx - dy
	for {
		c.set(x1, y1, color)
		if x1 == x2 && y1 == y2 {
			return
		}
		e2 := err * 2
		if e2 > -dy {
			err -= dy
			x1 += sx
		}
		if e2 < dx {
			err += dx
			y1 += sy
		}
	}
}

func abs(v int) int {
	if v < 0 {
		return -v
	}
	return v
}

// square is lwDrawSquare: a square centred at x,y, rotated by angle,
// with C's float and double steps.
func (c *lwCanvas) square(x, y int, size, angle float32, color byte) {
	size = float32(float64(size) / 1.4142135623)
	size = float32(math.Round(float64(size))) // C's round: half away from zero
	var px, py [4]int
	k := float32(math.Pi/4 + float64(angle))
	for j := range 4 {
		px[j] = int(math.Round(math.Sin(float64(k))*float64(size) + float64(x)))
		py[j] = int(math.Round(math.Cos(float64(k))*float64(size) + float64(y)))
		k = float32(float64(k) + math.Pi/2)
	}
	for j := range 4 {
		c.line(px[j], py[j], px[(j+1)%4], py[(j+1)%4], color)
	}
}

// lolwut5 is LOLWUT 5 [columns] [squares per row] [squares per column]
// (66, 8, 12): Schotter.
func lolwut5(args [][]byte) (string, string) {
	v, e := lolwutArgs(args, []int64{66, 8, 12}, []int64{1000, 200, 200})
	if e != "" {
		return "", e
	}
	canvas := schotter(int(v[0]), int(v[1]), int(v[2]))
	return renderBraille(canvas) + "\nGeorg Nees - schotter, plotter on paper, 1968. Redis ver. ", ""
}

// schotter is lwDrawSchotter.
func schotter(cols, perRow, perCol int) *lwCanvas {
	width := cols * 2
	padding := 0
	if width > 4 {
		padding = 2
	}
	side := float32(width-padding*2) / float32(perRow)
	height := int(float32(side*float32(perCol)) + float32(padding*2))
	canvas := newCanvas(width, height, 0)
	for y := range perCol {
		for x := range perRow {
			sx := int(float32(float32(float32(x)*side)+side/2) + float32(padding))
			sy := int(float32(float32(float32(y)*side)+side/2) + float32(padding))
			var angle float32
			if y > 1 {
				r := func() float32 {
					v := float32(float32(rand.Float32()/float32(perCol)) * float32(y))
					if rand.IntN(2) == 1 {
						v = -v
					}
					return v
				}
				r1, r2, r3 := r(), r(), r()
				angle = r1
				// C's sx += float: the sum in float, truncated.
				sx = int(float32(sx) + float32(r2*side)/3)
				sy = int(float32(sy) + float32(r3*side)/3)
			}
			canvas.square(sx, sy, side, angle, 1)
		}
	}
	return canvas
}

// renderBraille is lolwut5.c's renderCanvas: each 2x4 block of pixels a
// Braille character, a newline after each row of them but (as in Redis)
// one ending on the canvas's last line.
func renderBraille(c *lwCanvas) string {
	var b strings.Builder
	for y := 0; y < c.height; y += 4 {
		for x := 0; x < c.width; x += 2 {
			bits := 0
			for _, p := range [8][3]int{{0, 0, 0}, {0, 1, 1}, {0, 2, 2}, {1, 0, 3}, {1, 1, 4}, {1, 2, 5}, {0, 3, 6}, {1, 3, 7}} {
				if c.get(x+p[0], y+p[1]) != 0 {
					bits |= 1 << p[2]
				}
			}
			b.WriteRune(rune(0x2800 + bits))
		}
		if y != c.height-1 {
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// lolwut6 is LOLWUT 6 [columns] [rows] (80, 20): a skyline.
func lolwut6(args [][]byte) (string, string) {
	v, e := lolwutArgs(args, []int64{80, 20}, []int64{1000, 1000})
	if e != "" {
		return "", e
	}
	canvas := newCanvas(int(v[0]), int(v[1]), 3)
	skyline(canvas)
	return renderColors(canvas) + "\nDedicated to the 8 bit game developers of past and present.\n" +
		"Original 8 bit image from Plaguemon by hikikomori. Redis ver. ", ""
}

// skyscraper is lolwut6.c's.
type skyscraper struct {
	xoff, width, height int
	windows             bool
	color               byte
}

// skyscraper is generateSkyscraper: its windows one of the two greys.
func (c *lwCanvas) skyscraper(si skyscraper) {
	starty := c.height - 1
	endy := starty - si.height + 1
	for y := starty; y >= endy; y-- {
		for x := si.xoff; x < si.xoff+si.width; x++ {
			if y == endy && (x <= si.xoff+1 || x >= si.xoff+si.width-2) {
				continue // the roof is four pixels narrower
			}
			color := si.color
			if si.windows && x > si.xoff+1 && x < si.xoff+si.width-2 && y > endy+1 && y < starty-1 {
				relx, rely := x-(si.xoff+1), y-(endy+1)
				if relx/2%2 != 0 && rely%2 != 0 {
					for color == si.color {
						color = byte(1 + rand.IntN(2))
					}
					if relx%2 != 0 {
						color = c.get(x-1, y)
					}
				}
			}
			c.set(x, y, color)
		}
	}
}

// skyline is generateSkyline.
func skyline(c *lwCanvas) {
	for color := byte(2); color >= 1; color-- {
		for offset := -10; offset < c.width; {
			offset += rand.IntN(8)
			si := skyscraper{xoff: offset, width: 10 + rand.IntN(9), color: color}
			if color == 2 {
				si.height = c.height/2 + rand.IntN(1<<31-1)%c.height/2
			} else {
				si.height = c.height/2 + rand.IntN(1<<31-1)%c.height/3
			}
			c.skyscraper(si)
			if color == 2 {
				offset += si.width / 2
			} else {
				offset += si.width + 1
			}
		}
	}
	for offset := -10; offset < c.width; {
		offset += rand.IntN(8)
		si := skyscraper{xoff: offset, width: 5 + rand.IntN(14), windows: true}
		if si.width%4 != 0 {
			si.width += si.width % 3
		}
		si.height = c.height/3 + rand.IntN(1<<31-1)%c.height/2
		c.skyscraper(si)
		offset += si.width + 5
	}
}

// renderColors is lolwut6.c's renderCanvas: each pixel a space in one of
// four terminal colours.
func renderColors(c *lwCanvas) string {
	codes := [4]string{"0;30;40m", "0;90;100m", "0;37;47m", "0;97;107m"}
	var b strings.Builder
	for y := range c.height {
		for x := range c.width {
			ce := codes[0]
			if p := c.get(x, y); p < 4 {
				ce = codes[p]
			}
			b.WriteString("\033[" + ce + " \033[0m")
		}
		if y != c.height-1 {
			b.WriteByte('\n')
		}
	}
	return b.String()
}
