// BlazeFace post-processing of apps/facedetect (header-only, so nothing extra to link). Expected values
// are worked out by hand from MediaPipe's anchor and decoding rules, noted beside each check.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "../../apps/facedetect/blazeface.h"

namespace {

using blazeface::Detection;

Detection box(float score, float xmin, float ymin, float xmax, float ymax) {
  Detection d;
  d.score = score;
  d.xmin = xmin;
  d.ymin = ymin;
  d.xmax = xmax;
  d.ymax = ymax;
  return d;
}

TEST(BlazeFaceAnchors, FrontModelLayout) {
  const auto anchors = blazeface::anchors_for_input(128);
  // Stride 8 -> 16x16 cells x 2 anchors, then three stride-16 layers merged -> 8x8 cells x 6 anchors.
  ASSERT_EQ(anchors.size(), 16u * 16u * 2u + 8u * 8u * 6u);
  EXPECT_FLOAT_EQ(anchors[0].cx, 0.5f / 16);
  EXPECT_FLOAT_EQ(anchors[0].cy, 0.5f / 16);
  EXPECT_FLOAT_EQ(anchors[1].cx, 0.5f / 16);   // second anchor of the same cell
  EXPECT_FLOAT_EQ(anchors[2].cx, 1.5f / 16);   // next column
  EXPECT_FLOAT_EQ(anchors[32].cy, 1.5f / 16);  // next row: 16 cells x 2 anchors later
  EXPECT_FLOAT_EQ(anchors[511].cx, 15.5f / 16);
  EXPECT_FLOAT_EQ(anchors[512].cx, 0.5f / 8);  // first cell of the 8x8 map
  EXPECT_FLOAT_EQ(anchors[517].cx, 0.5f / 8);  // its sixth anchor
  EXPECT_FLOAT_EQ(anchors[518].cx, 1.5f / 8);
  EXPECT_FLOAT_EQ(anchors[895].cx, 7.5f / 8);
  EXPECT_FLOAT_EQ(anchors[895].cy, 7.5f / 8);
}

TEST(BlazeFaceAnchors, BackModelHasSameGrids) {
  const auto front = blazeface::anchors_for_input(128);
  const auto back = blazeface::anchors_for_input(256);
  ASSERT_EQ(back.size(), front.size());
  for (size_t i = 0; i < back.size(); ++i) {
    EXPECT_FLOAT_EQ(back[i].cx, front[i].cx);
    EXPECT_FLOAT_EQ(back[i].cy, front[i].cy);
  }
}

TEST(BlazeFaceAnchors, UnsupportedInputSizeThrows) {
  EXPECT_THROW(blazeface::anchors_for_input(192), std::invalid_argument);
}

TEST(BlazeFaceDecode, ThresholdAndRegressionScaling) {
  const std::vector<blazeface::Anchor> anchors = {{0.25f, 0.5f}, {0.75f, 0.75f}};
  // Logit 2 -> sigmoid 0.880797; logit -2 -> 0.119203 (below threshold 0.5, dropped).
  const std::vector<float> logits = {2.0f, -2.0f};
  std::vector<float> regressions(2 * blazeface::kRegressionSize, 0.0f);
  // Anchor 0: center offset (+12.8, -6.4) px of 128 -> (+0.1, -0.05); size 25.6 x 12.8 px -> 0.2 x 0.1.
  regressions[0] = 12.8f;
  regressions[1] = -6.4f;
  regressions[2] = 25.6f;
  regressions[3] = 12.8f;
  regressions[4] = 64.0f;  // keypoint 0: x = 0.25 + 0.5
  regressions[5] = 0.0f;   //             y = 0.5
  const auto faces = blazeface::decode(anchors, logits.data(), regressions.data(), 128, 0.5f);
  ASSERT_EQ(faces.size(), 1u);
  const Detection& f = faces[0];
  EXPECT_NEAR(f.score, 0.880797f, 1e-6);
  EXPECT_NEAR(f.xmin, 0.35f - 0.1f, 1e-6);  // center x 0.35, half width 0.1
  EXPECT_NEAR(f.xmax, 0.35f + 0.1f, 1e-6);
  EXPECT_NEAR(f.ymin, 0.45f - 0.05f, 1e-6);  // center y 0.45, half height 0.05
  EXPECT_NEAR(f.ymax, 0.45f + 0.05f, 1e-6);
  EXPECT_NEAR(f.keypoints[0].x, 0.75f, 1e-6);
  EXPECT_NEAR(f.keypoints[0].y, 0.5f, 1e-6);
  EXPECT_NEAR(f.keypoints[1].x, 0.25f, 1e-6);  // zero regression: at the anchor
}

TEST(BlazeFaceDecode, HugeLogitsDoNotOverflow) {
  const std::vector<blazeface::Anchor> anchors = {{0.5f, 0.5f}};
  const std::vector<float> logits = {1e30f};
  const std::vector<float> regressions(blazeface::kRegressionSize, 0.0f);
  const auto faces = blazeface::decode(anchors, logits.data(), regressions.data(), 128, 0.5f);
  ASSERT_EQ(faces.size(), 1u);
  EXPECT_FLOAT_EQ(faces[0].score, 1.0f);
}

TEST(BlazeFaceNms, IouOfHalfOverlap) {
  // Two unit squares overlapping by half: intersection 0.5, union 1.5.
  EXPECT_NEAR(blazeface::iou(box(1, 0, 0, 1, 1), box(1, 0.5f, 0, 1.5f, 1)), 1.0f / 3.0f, 1e-6);
  EXPECT_EQ(blazeface::iou(box(1, 0, 0, 1, 1), box(1, 2, 2, 3, 3)), 0.0f);
}

TEST(BlazeFaceNms, BlendsOverlapsKeepsSeparateFaces) {
  std::vector<Detection> in = {
      box(0.6f, 0.1f, 0, 1.1f, 1),  // overlaps the best one (IoU 0.818) -> blended into it
      box(0.9f, 0, 0, 1, 1),        // best
      box(0.8f, 5, 5, 6, 6),        // a second face, far away
  };
  in[0].keypoints[0] = {1.0f, 1.0f};
  in[1].keypoints[0] = {0.0f, 0.0f};
  const auto out = blazeface::weighted_nms(in, 0.3f);
  ASSERT_EQ(out.size(), 2u);
  // Blended: weights 0.9 and 0.6 -> xmin = (0.9*0 + 0.6*0.1)/1.5 = 0.04, xmax = (0.9*1 + 0.6*1.1)/1.5 = 1.04.
  EXPECT_NEAR(out[0].score, 0.9f, 1e-6);  // the best score, not the mean
  EXPECT_NEAR(out[0].xmin, 0.04f, 1e-6);
  EXPECT_NEAR(out[0].xmax, 1.04f, 1e-6);
  EXPECT_NEAR(out[0].ymin, 0.0f, 1e-6);
  EXPECT_NEAR(out[0].keypoints[0].x, 0.4f, 1e-6);  // (0.9*0 + 0.6*1)/1.5
  EXPECT_NEAR(out[1].score, 0.8f, 1e-6);
  EXPECT_NEAR(out[1].xmin, 5.0f, 1e-6);
}

TEST(BlazeFaceNms, EmptyInput) { EXPECT_TRUE(blazeface::weighted_nms({}).empty()); }

TEST(BlazeFaceLetterbox, WideImageIsPaddedVertically) {
  // 640x320 into 128: scale 0.2, image occupies 128x64 centered -> 32 px bars above and below.
  const auto lb = blazeface::make_letterbox(640, 320, 128);
  EXPECT_FLOAT_EQ(lb.scale, 0.2f);
  EXPECT_NEAR(lb.pad_x, 0.0f, 1e-5f);  // (clang computes -9.5e-7: FLOAT_EQ has no slack at 0)
  EXPECT_FLOAT_EQ(lb.pad_y, 32.0f);
  // Input point (0.5, 0.5) is the image center; (0, 0.25) is the image's top-left corner.
  Detection d = box(1, 0, 0.25f, 0.5f, 0.5f);
  d.keypoints[0] = {0.5f, 0.75f};  // image bottom center
  const Detection m = blazeface::map_to_image(d, lb);
  EXPECT_NEAR(m.xmin, 0.0f, 1e-4);
  EXPECT_NEAR(m.ymin, 0.0f, 1e-4);
  EXPECT_NEAR(m.xmax, 320.0f, 1e-4);
  EXPECT_NEAR(m.ymax, 160.0f, 1e-4);
  EXPECT_NEAR(m.keypoints[0].x, 320.0f, 1e-4);
  EXPECT_NEAR(m.keypoints[0].y, 320.0f, 1e-4);
}

TEST(BlazeFaceLetterbox, EmptyImageThrows) {
  EXPECT_THROW(blazeface::make_letterbox(0, 10, 128), std::invalid_argument);
}

}  // namespace
