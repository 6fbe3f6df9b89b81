// Host-side helpers of gemm.h and the dispatch from a runtime TileConfig to an instantiated kernel.
#include "config.cuh"
#include "plain.cuh"

namespace weft::gemm {

bool tile_config_supported(const TileConfig& t) {
  switch (t.tile_n) {
    case 256:
    case 128: return t.cluster_n == 1 && (t.cluster_m == 1 || t.cluster_m == 2);
    case 64: return t.cluster_m == 1 && (t.cluster_n == 1 || t.cluster_n == 2);
    default: return false;
  }
}

Boxes box_dims(const TileConfig& t, bool b_n_major, bool out_f32, int64_t a_rows) {
  Boxes b{};
  b.a[0] = kTileK;
  b.a[1] = uint32_t(a_box_rows(t, a_rows));
  if (b_n_major) {
    b.b[0] = 64;  // N
    b.b[1] = kTileK;
  } else {
    b.b[0] = kTileK;
    b.b[1] = t.cluster_m == 2 ? t.tile_n / 2 : t.tile_n;
  }
  b.c[0] = out_f32 ? 32 : 64;
  b.c[1] = kTileM / 2;
  return b;
}

int pipeline_stages(const TileConfig& t, bool out_f32) {
  // Stages depend on the tile width and the epilogue staging only (not on layout or clusters).
  switch (t.tile_n) {
    case 256: return out_f32 ? Config<256, 1, 1, false, true>::kStages : Config<256, 1, 1, false, false>::kStages;
    case 128: return out_f32 ? Config<128, 1, 1, false, true>::kStages : Config<128, 1, 1, false, false>::kStages;
    default: return out_f32 ? Config<64, 1, 1, false, true>::kStages : Config<64, 1, 1, false, false>::kStages;
  }
}

namespace {
cudaError_t dispatch(const PlainLaunch& l, int* ctas) {
  if (!tile_config_supported(l.tile)) return cudaErrorInvalidConfiguration;
  switch (l.tile.tile_n) {
    case 256: return launch_plain_n256(l, ctas);
    case 128: return launch_plain_n128(l, ctas);
    default: return launch_plain_n64(l, ctas);
  }
}
}  // namespace

cudaError_t launch_plain(const PlainLaunch& l) { return dispatch(l, nullptr); }

cudaError_t plain_grid(const PlainLaunch& l, int* ctas) {
  *ctas = 0;
  return dispatch(l, ctas);
}

}  // namespace weft::gemm
