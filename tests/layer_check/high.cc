// A room above: defines what low.cc uses (tests/layer_check/CMakeLists.txt).
int ekcoLayerHigh() { return 42; }
