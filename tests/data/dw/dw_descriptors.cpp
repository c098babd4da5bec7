// dw_descriptors.cpp -- reference-output harness for descbench's descriptor ports.
//
// This file is descbench's own code. It contains no code from the C++ DescriptorWorkbench
// (F-Sossi/DescriptorWorkbench); it is compiled together with, and calls, the workbench's
// unmodified source files (keypoint classes, descriptor wrapper classes, NoPooling, logger),
// which are taken from a local checkout of commit b834e17 and never copied into descbench.
// The build command is in make_descriptor_fixtures.py (module docstring).
//
// Usage:
//   dw_descriptors IMAGE KEYPOINTS OUTDIR TYPE [TYPE ...]
//
// IMAGE      an image file, read like the workbench's experiment runner reads every image:
//            cv::imread(path, cv::IMREAD_COLOR) (BGR, 8 bit).
// KEYPOINTS  one keypoint per line: "x y size angle response octave class_id", every field a
//            C99 hex float ("%a"), so float32 values travel exactly. octave and class_id are
//            integers stored as floats (exact: |value| < 2^24).
// OUTDIR     receives, per TYPE, "<TYPE>.raw.f32" (what the wrapper's extract() returns,
//            row-major little-endian float32, one row per input keypoint, in input order) and,
//            where the workbench has a pipeline for the type, "<TYPE>.pipeline.f32" (the same
//            keypoints through the workbench's NoPooling strategy, i.e. what the experiment
//            runner computes with default parameters), plus "<TYPE>.dspindex.txt" for the
//            DSP types (see below). A line per output goes to OUTDIR/manifest.txt:
//            "<TYPE> <raw|pipeline> <rows> <cols> <n_nonfinite> <input: gray|color>".
//
// Types (default DescriptorParams everywhere, i.e. what a YAML descriptor entry with only a
// `type:` gets): vSIFT RGBSIFT RGBSIFT_CHANNEL_AVG HoNC HoWH DSPSIFT_V2 DSPRGBSIFT_V2
// DSPHOWH_V2 DSPHONC_V2 DSPSIFT ORB, plus the non-default variants DSPHOWH_V2_COLOR (DSPHOWH_V2
// given the colour image, i.e. a YAML entry with `use_color: true`), DSPSIFT_S085_130 and
// DSPSIFT_S150 (DSPSIFT with `scales: [0.85, 1.0, 1.3]` and `[1.5]`). ORB writes uint8 rows
// ("<TYPE>.<kind>.u8") and "<TYPE>.order.txt" (see write_orb_order).
//
// Input image per type: the experiment runner converts the BGR image to grey
// (cv::COLOR_BGR2GRAY) unless params.use_color is set, and the YAML loader sets use_color only
// for the types it lists as colour types (RGBSIFT, RGBSIFT_CHANNEL_AVG, HoNC, DSPRGBSIFT_V2,
// DSPHONC_V2). So vSIFT, DSPSIFT_V2, DSPHOWH_V2, DSPSIFT and ORB get the grey image by default. HoWH has
// no DescriptorType (no pipeline); the raw HoWH class is given the colour image.
//
// Which workbench class each type instantiates (as DescriptorFactory::create does):
//   vSIFT               wrappers::VSIFTWrapper
//   RGBSIFT             wrappers::RGBSIFTWrapper
//   RGBSIFT_CHANNEL_AVG wrappers::RGBSIFTChannelAverageWrapper
//   HoNC                wrappers::HoNCWrapper
//   DSPSIFT_V2          thesis_project::DSPSIFTWrapperV2
//   DSPRGBSIFT_V2       wrappers::DSPRGBSIFTWrapperV2
//   DSPHOWH_V2          wrappers::DSPHoWHWrapperV2
//   DSPHONC_V2          wrappers::DSPHoNCWrapperV2
//   DSPSIFT             wrappers::DSPSIFTWrapper (-> DSPSIFT, keypoints/DSPSIFT.cpp)
//   ORB                 wrappers::ORBWrapper
//   HoWH                the HoWH class itself: HoWH().compute(image, keypoints, descriptors)
// All wrappers are the workbench's own compiled classes (none is mirrored here).
//
// DSP index report (<TYPE>.dspindex.txt, DSP types only): for every keypoint and scale the
// pyramid slot the DSP wrapper picks. The numbers are recomputed here with the same formula
// (this harness cannot see inside the wrapper), one line per (keypoint, scale):
//   "<row> <scale_idx> <octave> <layer> <wanted_index> <used_index> <n_pyramid_images> <status>"
// status: ok | clamped (wanted_index past the pyramid's end: the wrapper samples the last
// image of the last octave with coordinates scaled for the octave it wanted) | invalid
// (wanted_index < 0: that scale's row is all -1 and is left out of the average).

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <iostream>
#include <limits>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include "keypoints/HoWH.h"
#include "src/core/config/ExperimentConfig.hpp"
#include "src/core/descriptor/extractors/wrappers/DSPHoNCWrapperV2.hpp"
#include "src/core/descriptor/extractors/wrappers/DSPHoWHWrapperV2.hpp"
#include "src/core/descriptor/extractors/wrappers/DSPRGBSIFTWrapperV2.hpp"
#include "src/core/descriptor/extractors/wrappers/DSPSIFTWrapper.hpp"
#include "src/core/descriptor/extractors/wrappers/DSPSIFTWrapperV2.hpp"
#include "src/core/descriptor/extractors/wrappers/HoNCWrapper.hpp"
#include "src/core/descriptor/extractors/wrappers/ORBWrapper.hpp"
#include "src/core/descriptor/extractors/wrappers/RGBSIFTChannelAverageWrapper.hpp"
#include "src/core/descriptor/extractors/wrappers/RGBSIFTWrapper.hpp"
#include "src/core/descriptor/extractors/wrappers/VSIFTWrapper.hpp"
#include "src/core/pooling/NoPooling.hpp"

#include "dw_keypoints.hpp"  // read_keypoints: the generators' keypoint file

namespace {

namespace tp = thesis_project;

int count_nonfinite(const cv::Mat& m) {
    int n = 0;
    if (m.depth() != CV_32F) return 0;
    for (int r = 0; r < m.rows; ++r) {
        const float* p = m.ptr<float>(r);
        for (int c = 0; c < m.cols; ++c) {
            if (!std::isfinite(p[c])) ++n;
        }
    }
    return n;
}

// Row-major little-endian rows: float32 ("<TYPE>.<kind>.f32") or, for binary types, uint8
// ("<TYPE>.<kind>.u8").
void write_rows(const std::string& path, const cv::Mat& m, int type) {
    if (!m.empty() && m.type() != type) {
        throw std::runtime_error("descriptor matrix has an unexpected type: " + path);
    }
    std::ofstream out(path, std::ios::binary);
    for (int r = 0; r < m.rows; ++r) {
        out.write(reinterpret_cast<const char*>(m.ptr<uchar>(r)),
                  static_cast<std::streamsize>(m.elemSize() * m.cols));
    }
    if (!out) {
        throw std::runtime_error("write failed: " + path);
    }
}

// Pyramid slot per (keypoint, scale) for the DSP V2 wrappers, recomputed from the keypoints
// and the wrapper's parameters (sigma 1.6 and 3 layers per octave: the VanillaSIFT defaults
// the wrappers are constructed with; scales from DescriptorParams).
void write_dsp_index(const std::string& path, const std::vector<cv::KeyPoint>& kps,
                     const tp::DescriptorParams& params) {
    const double sigma = 1.6;
    const int layers = 3;
    int first = 0;
    int maxo = std::numeric_limits<int>::min();
    for (const auto& kp : kps) {
        int o = kp.octave & 255;
        o = o < 128 ? o : (-128 | o);
        first = std::min(first, o);
        maxo = std::max(maxo, o);
    }
    first = std::min(first, 0);
    int n_oct = maxo - first + 1;
    const std::vector<float>& scales = params.scales;
    float min_scale = scales.empty() ? 1.0f : scales[0];
    for (float s : scales) min_scale = std::min(min_scale, s);
    if (scales.size() > 1 && min_scale < 1.0f) n_oct += 1;
    const int n_img = n_oct * (layers + 3);

    std::ofstream out(path);
    out << "# first_octave " << first << " max_octave " << maxo << " n_octaves " << n_oct
        << " n_pyramid_images " << n_img << "\n";
    for (size_t i = 0; i < kps.size(); ++i) {
        for (size_t s = 0; s < scales.size(); ++s) {
            float size = static_cast<float>(kps[i].size * scales[s]);
            float fo = static_cast<float>(std::log2(size / (2 * sigma)));
            int octave = static_cast<int>(std::floor(fo));
            int layer = static_cast<int>(std::floor((fo - octave) * layers));
            int wanted = (octave - first) * (layers + 3) + layer;
            int used = std::max(0, std::min(n_img - 1, wanted));
            const char* status = wanted < 0 ? "invalid" : (wanted != used ? "clamped" : "ok");
            out << i << " " << s << " " << octave << " " << layer << " " << wanted << " "
                << used << " " << n_img << " " << status << "\n";
        }
    }
}

struct TypeSpec {
    bool color_input;      // image handed to the extractor: BGR (true) or grey (false)
    bool has_pipeline;     // a DescriptorType the experiment runner can run
    bool dsp;              // a DSP V2 wrapper (write the pyramid-slot report)
    std::function<std::unique_ptr<tp::IDescriptorExtractor>()> make;  // null: raw HoWH class
    std::vector<float> scales = {};  // non-empty: DescriptorParams::scales (else the default)
    bool binary = false;   // CV_8U rows (ORB): ".u8" files and the ORB order report
};

// ORB order report (<TYPE>.order.txt): cv::ORB::create()->compute (what ORBWrapper calls) on the
// same keypoints with class_id = input row, one line per returned row: the input row it
// describes (ORB returns the keypoints grouped by their octave field, and drops border ones).
void write_orb_order(const std::string& path, const cv::Mat& image, const std::vector<cv::KeyPoint>& kps) {
    std::vector<cv::KeyPoint> tagged = kps;
    for (size_t i = 0; i < tagged.size(); ++i) tagged[i].class_id = static_cast<int>(i);
    cv::Mat desc;
    std::ofstream out(path);
    try {
        cv::ORB::create()->compute(image, tagged, desc);
    } catch (const cv::Exception& e) {
        std::string what = e.what();
        for (char& c : what) if (c == '\n') c = ' ';
        out << "# exception " << what << "\n";
        return;
    }
    for (const auto& kp : tagged) out << kp.class_id << "\n";
}

std::map<std::string, TypeSpec> type_table() {
    using namespace tp::wrappers;
    std::map<std::string, TypeSpec> t;
    t["vSIFT"] = {false, true, false, [] { return std::make_unique<VSIFTWrapper>(); }};
    t["RGBSIFT"] = {true, true, false, [] { return std::make_unique<RGBSIFTWrapper>(); }};
    t["RGBSIFT_CHANNEL_AVG"] = {true, true, false,
                                [] { return std::make_unique<RGBSIFTChannelAverageWrapper>(); }};
    t["HoNC"] = {true, true, false, [] { return std::make_unique<HoNCWrapper>(); }};
    t["HoWH"] = {true, false, false, nullptr};
    t["DSPSIFT_V2"] = {false, true, true,
                       [] { return std::make_unique<tp::DSPSIFTWrapperV2>(); }};
    t["DSPRGBSIFT_V2"] = {true, true, true,
                          [] { return std::make_unique<DSPRGBSIFTWrapperV2>(); }};
    t["DSPHOWH_V2"] = {false, true, true, [] { return std::make_unique<DSPHoWHWrapperV2>(); }};
    t["DSPHOWH_V2_COLOR"] = {true, true, true,
                             [] { return std::make_unique<DSPHoWHWrapperV2>(); }};
    t["DSPHONC_V2"] = {true, true, true, [] { return std::make_unique<DSPHoNCWrapperV2>(); }};
    // DSPSIFT (keypoints/DSPSIFT.cpp via DSPSIFTWrapper): default scales, and two non-default
    // scale lists (three scales resampled between 0.85 and 1.3; one scale, 1.5)
    auto dspsift = [] { return std::make_unique<DSPSIFTWrapper>(); };
    t["DSPSIFT"] = {false, true, false, dspsift};
    t["DSPSIFT_S085_130"] = {false, true, false, dspsift, {0.85f, 1.0f, 1.3f}};
    t["DSPSIFT_S150"] = {false, true, false, dspsift, {1.5f}};
    t["ORB"] = {false, true, false, [] { return std::make_unique<ORBWrapper>(); }, {}, true};
    return t;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 5) {
        std::cerr << "usage: " << argv[0] << " IMAGE KEYPOINTS OUTDIR TYPE [TYPE ...]\n";
        return 2;
    }
    try {
        const std::string image_path = argv[1];
        const std::string outdir = argv[3];
        const cv::Mat bgr = cv::imread(image_path, cv::IMREAD_COLOR);
        if (bgr.empty()) {
            throw std::runtime_error("cannot read image " + image_path);
        }
        cv::Mat gray;
        cv::cvtColor(bgr, gray, cv::COLOR_BGR2GRAY);
        const std::vector<cv::KeyPoint> kps = read_keypoints(argv[2]);
        const auto table = type_table();
        std::ofstream manifest(outdir + "/manifest.txt", std::ios::app);

        for (int a = 4; a < argc; ++a) {
            const std::string name = argv[a];
            auto it = table.find(name);
            if (it == table.end()) {
                throw std::runtime_error("unknown type " + name);
            }
            const TypeSpec& spec = it->second;
            const cv::Mat& image = spec.color_input ? bgr : gray;
            const char* input = spec.color_input ? "color" : "gray";

            tp::config::ExperimentConfig::DescriptorConfig cfg;
            cfg.name = name;
            cfg.params = tp::DescriptorParams{};
            cfg.params.use_color = spec.color_input;
            if (!spec.scales.empty()) cfg.params.scales = spec.scales;
            const int mtype = spec.binary ? CV_8U : CV_32F;
            const std::string ext = spec.binary ? ".u8" : ".f32";

            cv::Mat raw;
            if (!spec.make) {
                HoWH howh;
                std::vector<cv::KeyPoint> copy = kps;
                howh.compute(image, copy, raw);
                if (copy.size() != kps.size()) {
                    throw std::runtime_error("HoWH changed the keypoint count");
                }
            } else {
                auto extractor = spec.make();
                raw = extractor->extract(image, kps, cfg.params);
            }
            write_rows(outdir + "/" + name + ".raw" + ext, raw, mtype);
            manifest << name << " raw " << raw.rows << " " << raw.cols << " "
                     << count_nonfinite(raw) << " " << input << "\n";

            if (spec.has_pipeline) {
                auto extractor = spec.make();
                tp::pooling::NoPooling pooling;
                cv::Mat piped = pooling.computeDescriptors(image, kps, *extractor, cfg);
                write_rows(outdir + "/" + name + ".pipeline" + ext, piped, mtype);
                manifest << name << " pipeline " << piped.rows << " " << piped.cols << " "
                         << count_nonfinite(piped) << " " << input << "\n";
            }
            if (spec.binary) {
                write_orb_order(outdir + "/" + name + ".order.txt", image, kps);
            }
            if (spec.dsp) {
                write_dsp_index(outdir + "/" + name + ".dspindex.txt", kps, cfg.params);
            }
        }
    } catch (const std::exception& e) {
        std::cerr << "dw_descriptors: " << e.what() << "\n";
        return 1;
    }
    return 0;
}
