// json.h — forwards to the one JSON codec, native/format/json.h (Note [One JSON codec]). Kept only so
// files that include "json.h" from this directory keep building; new code includes the format header.
#pragma once
#include "../../format/json.h"
