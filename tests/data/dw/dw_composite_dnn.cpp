// dw_composite_dnn.cpp -- reference-output harness for descbench's COMPOSITE and DNN_PATCH ports.
//
// This file is descbench's own code. It contains no code from the C++ DescriptorWorkbench
// (F-Sossi/DescriptorWorkbench); it is compiled together with, and calls, the workbench's
// unmodified CompositeDescriptorExtractor.cpp, DNNPatchWrapper.cpp, the descriptor wrappers and
// keypoint classes its components use, and NoPooling.cpp (commit b834e17), against OpenCV (with
// its dnn module). The build commands are in make_composite_dnn_fixtures.py (module docstring).
//
// Usage:
//   dw_composite_dnn IMAGE KEYPOINTS OUTDIR ONNX_MODEL
//
// IMAGE      read with cv::imread(IMREAD_COLOR). The composites below have a colour component
//            (HoNC or RGBSIFT), so the workbench's YAML loader sets use_color on them
//            (YAMLConfigLoader.cpp:452-466) and the runner hands them the BGR image; DNN_PATCH is
//            not a colour type: it gets the grey image (cvtColor BGR2GRAY).
// KEYPOINTS  one keypoint per line, "x y size angle response octave class_id", C99 hex floats.
// OUTDIR     per output NAME, "<NAME>.raw.f32" (the extractor's extract(), float32 row-major, one
//            row per keypoint) and "<NAME>.pipeline.f32" (NoPooling with default DescriptorParams:
//            what the runner stores), and a line "<NAME> <raw|pipeline> <rows> <cols>" in
//            OUTDIR/manifest.txt.
//
// Outputs:
//   COMPOSITE_<AGG>   CompositeDescriptorExtractor with components {HoNC, DSPSIFT_V2} (in that
//                     order, default component params, no keypoint_set_name: both on the given
//                     keypoints) and aggregation AVERAGE, WEIGHTED_AVG (weights 0.3, 0.7), MAX,
//                     MIN, CONCATENATE;
//   COMPOSITE_CHANNEL_WISE_128 / _384   components {DSPSIFT_V2, RGBSIFT}, CHANNEL_WISE,
//                     COLLAPSE_GRAY / PRESERVE_RGB;
//   DNN_PATCH         DNNPatchWrapper(ONNX_MODEL) with the runner's arguments from default
//                     DescriptorParams (processing.cpp:797-805: dnn_input_size 32,
//                     dnn_support_multiplier 1.0, dnn_rotate_upright true, dnn_mean 0, dnn_std 1,
//                     dnn_per_patch_standardize false; descriptor_size the header's default 128).
//
// The composite creates its components with factories::DescriptorFactory::create. The
// workbench's DescriptorFactory.cpp also builds VGG and SURF (opencv_contrib's xfeatures2d, not in
// Debian's libopencv-dev), so this harness defines DescriptorFactory::create itself, returning for
// each type the wrapper class the workbench's factory returns (DescriptorFactory.cpp:33-55); it
// refuses other types. DatabaseManager's two keypoint look-ups, used only with paired keypoint sets,
// are defined here to throw (no component here names a keypoint set).

#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include "src/core/config/ExperimentConfig.hpp"
#include "src/core/descriptor/extractors/CompositeDescriptorExtractor.hpp"
#include "src/core/descriptor/extractors/wrappers/DNNPatchWrapper.hpp"
#include "src/core/descriptor/extractors/wrappers/DSPRGBSIFTWrapperV2.hpp"
#include "src/core/descriptor/extractors/wrappers/DSPSIFTWrapperV2.hpp"
#include "src/core/descriptor/extractors/wrappers/HoNCWrapper.hpp"
#include "src/core/descriptor/extractors/wrappers/RGBSIFTWrapper.hpp"
#include "src/core/descriptor/factories/DescriptorFactory.hpp"
#include "src/core/pooling/NoPooling.hpp"
#include "thesis_project/database/DatabaseManager.hpp"

#include "dw_keypoints.hpp"  // read_keypoints: the generators' keypoint file

namespace tp = thesis_project;

namespace thesis_project::factories {
std::unique_ptr<IDescriptorExtractor> DescriptorFactory::create(DescriptorType type) {
    switch (type) {
        case DescriptorType::RGBSIFT: return std::make_unique<wrappers::RGBSIFTWrapper>();
        case DescriptorType::HoNC: return std::make_unique<wrappers::HoNCWrapper>();
        case DescriptorType::DSPSIFT_V2: return std::make_unique<DSPSIFTWrapperV2>();
        case DescriptorType::DSPRGBSIFT_V2: return std::make_unique<wrappers::DSPRGBSIFTWrapperV2>();
        default: throw std::runtime_error("dw_composite_dnn: type not built into this harness");
    }
}
}  // namespace thesis_project::factories

namespace thesis_project::database {
int DatabaseManager::getKeypointSetId(const std::string&) const {
    throw std::runtime_error("dw_composite_dnn: no database");
}
std::vector<cv::KeyPoint> DatabaseManager::getLockedKeypointsFromSet(int, const std::string&,
                                                                     const std::string&) const {
    throw std::runtime_error("dw_composite_dnn: no database");
}
}  // namespace thesis_project::database

namespace {

void write_f32(const std::string& path, const cv::Mat& m) {
    if (m.type() != CV_32F || !m.isContinuous()) throw std::runtime_error("not a continuous CV_32F matrix: " + path);
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(m.ptr<float>(0)), static_cast<std::streamsize>(sizeof(float) * m.total()));
    if (!out) throw std::runtime_error("write failed: " + path);
}

void run(const std::string& outdir, const std::string& name, tp::IDescriptorExtractor& ex, const cv::Mat& image,
         const std::vector<cv::KeyPoint>& kps, std::ofstream& manifest) {
    tp::config::ExperimentConfig::DescriptorConfig cfg;
    cfg.name = name;
    cfg.params = tp::DescriptorParams{};
    cv::Mat raw = ex.extract(image, kps, cfg.params);
    write_f32(outdir + "/" + name + ".raw.f32", raw);
    manifest << name << " raw " << raw.rows << " " << raw.cols << "\n";
    tp::pooling::NoPooling pooling;
    cv::Mat piped = pooling.computeDescriptors(image, kps, ex, cfg);
    write_f32(outdir + "/" + name + ".pipeline.f32", piped);
    manifest << name << " pipeline " << piped.rows << " " << piped.cols << "\n";
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 5) {
        std::cerr << "usage: " << argv[0] << " IMAGE KEYPOINTS OUTDIR ONNX_MODEL\n";
        return 2;
    }
    try {
        const cv::Mat bgr = cv::imread(argv[1], cv::IMREAD_COLOR);
        if (bgr.empty()) throw std::runtime_error(std::string("cannot read image ") + argv[1]);
        cv::Mat gray;
        cv::cvtColor(bgr, gray, cv::COLOR_BGR2GRAY);
        const std::vector<cv::KeyPoint> kps = read_keypoints(argv[2]);
        const std::string outdir = argv[3];
        std::ofstream manifest(outdir + "/manifest.txt", std::ios::app);

        using C = tp::CompositeDescriptorExtractor;
        using Agg = C::AggregationMethod;
        auto comp = [](tp::DescriptorType t, double w) {
            C::ComponentConfig c(t, w);
            c.params = tp::DescriptorParams{};
            c.params.use_color = (t == tp::DescriptorType::HoNC || t == tp::DescriptorType::RGBSIFT);
            return c;
        };
        const struct { const char* name; Agg agg; double w0, w1; } same[] = {
            {"COMPOSITE_AVERAGE", Agg::AVERAGE, 1.0, 1.0},
            {"COMPOSITE_WEIGHTED_AVG", Agg::WEIGHTED_AVG, 0.3, 0.7},
            {"COMPOSITE_MAX", Agg::MAX, 1.0, 1.0},
            {"COMPOSITE_MIN", Agg::MIN, 1.0, 1.0},
            {"COMPOSITE_CONCATENATE", Agg::CONCATENATE, 1.0, 1.0},
        };
        for (const auto& s : same) {
            C ex({comp(tp::DescriptorType::HoNC, s.w0), comp(tp::DescriptorType::DSPSIFT_V2, s.w1)}, s.agg);
            run(outdir, s.name, ex, bgr, kps, manifest);
        }
        for (const auto& [name, mode] : {std::pair{"COMPOSITE_CHANNEL_WISE_128", C::OutputDimensionMode::COLLAPSE_GRAY},
                                         std::pair{"COMPOSITE_CHANNEL_WISE_384", C::OutputDimensionMode::PRESERVE_RGB}}) {
            C ex({comp(tp::DescriptorType::DSPSIFT_V2, 1.0), comp(tp::DescriptorType::RGBSIFT, 1.0)},
                 Agg::CHANNEL_WISE, mode);
            run(outdir, name, ex, bgr, kps, manifest);
        }
        const tp::DescriptorParams d{};
        tp::wrappers::DNNPatchWrapper dnn(argv[4], d.dnn_input_size, d.dnn_support_multiplier, d.dnn_rotate_upright,
                                          d.dnn_mean, d.dnn_std, d.dnn_per_patch_standardize);
        run(outdir, "DNN_PATCH", dnn, gray, kps, manifest);
    } catch (const std::exception& e) {
        std::cerr << "dw_composite_dnn: " << e.what() << "\n";
        return 1;
    }
    return 0;
}
