// A room below that uses a symbol of the room above it (tests/layer_check/CMakeLists.txt).
int ekcoLayerHigh();
int ekcoLayerLow() { return ekcoLayerHigh() + 1; }
