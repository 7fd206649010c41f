package conformance

// Small media for the image, audio and binary-resource scenarios, base64-encoded.
const (
	// pngPixel is a 1x1 red PNG.
	pngPixel = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAAEElEQVR42mL6z8AACAAA//8DCQECsLd63wAAAABJRU5ErkJggg=="
	// wavSample is a WAV file of one silent sample (PCM, mono, 8kHz, 16-bit).
	wavSample = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAIA+AAACABAAZGF0YQIAAAAAAA=="
)
