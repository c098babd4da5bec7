// dw_libtorch.cpp -- reference-output harness for descbench's LIBTORCH_HARDNET / LIBTORCH_SOSNET.
//
// This file is descbench's own code. It contains no code from the C++ DescriptorWorkbench
// (F-Sossi/DescriptorWorkbench); it is compiled together with, and calls, the workbench's
// unmodified LibTorchWrapper.cpp, LibTorchFactory.cpp and NoPooling.cpp (commit b834e17), and
// is linked against LibTorch (the installed torch wheel) and OpenCV. The build commands are in
// make_libtorch_fixtures.py (module docstring).
//
// Usage (run from a folder whose parent holds models/hardnet.pt and models/sosnet.pt: the
// workbench's factory opens "../models/<name>.pt" relative to the working directory):
//   dw_libtorch IMAGE KEYPOINTS OUTDIR [PATCH_MODEL]
//
// IMAGE      read like the experiment runner reads it: cv::imread(IMREAD_COLOR), then
//            cv::cvtColor(BGR2GRAY) (LIBTORCH_* are not colour types, so the runner hands the
//            wrapper the grey image).
// KEYPOINTS  one keypoint per line, "x y size angle response octave class_id", C99 hex floats.
// OUTDIR     receives, per type, "<TYPE>.raw.f32" (the wrapper's extract(): one L2-normalised row
//            per keypoint, float32 little-endian, row-major) and "<TYPE>.pipeline.f32" (the same
//            through NoPooling with default DescriptorParams: L2 once more), and a line per output
//            in OUTDIR/manifest.txt: "<TYPE> <raw|pipeline> <rows> <cols>".
//            TYPE: LIBTORCH_HARDNET (createLibTorchHardNet()), LIBTORCH_SOSNET
//            (createLibTorchSOSNet()).
// PATCH_MODEL (optional) a TorchScript model; if given, also "PATCH.raw.f32": a LibTorchWrapper
//            built with the factory's HardNet arguments (32, 2.0, upright, 0, 1, per-patch
//            standardisation, INTER_LINEAR) but output size 1024, around that model. With a model
//            that flattens its input, each row is the patch the wrapper hands the network
//            (warped, standardised), divided by its L2 norm (tensorToMat normalises every row).

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
#include "src/core/descriptor/extractors/wrappers/LibTorchFactory.hpp"
#include "src/core/descriptor/extractors/wrappers/LibTorchWrapper.hpp"
#include "src/core/pooling/NoPooling.hpp"

#include "dw_keypoints.hpp"  // read_keypoints: the generators' keypoint file

namespace {

namespace tp = thesis_project;

void write_f32(const std::string& path, const cv::Mat& m) {
    if (m.type() != CV_32F) throw std::runtime_error("descriptor matrix is not CV_32F: " + path);
    std::ofstream out(path, std::ios::binary);
    for (int r = 0; r < m.rows; ++r) {
        out.write(reinterpret_cast<const char*>(m.ptr<float>(r)),
                  static_cast<std::streamsize>(sizeof(float) * m.cols));
    }
    if (!out) throw std::runtime_error("write failed: " + path);
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 4 || argc > 5) {
        std::cerr << "usage: " << argv[0] << " IMAGE KEYPOINTS OUTDIR [PATCH_MODEL]\n";
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

        tp::config::ExperimentConfig::DescriptorConfig cfg;
        cfg.params = tp::DescriptorParams{};

        struct Named { const char* name; std::unique_ptr<tp::IDescriptorExtractor> (*make)(); };
        const Named types[] = {{"LIBTORCH_HARDNET", &tp::wrappers::createLibTorchHardNet},
                               {"LIBTORCH_SOSNET", &tp::wrappers::createLibTorchSOSNet}};
        for (const auto& t : types) {
            cfg.name = t.name;
            auto extractor = t.make();
            cv::Mat raw = extractor->extract(gray, kps, cfg.params);
            write_f32(outdir + "/" + t.name + ".raw.f32", raw);
            manifest << t.name << " raw " << raw.rows << " " << raw.cols << "\n";
            tp::pooling::NoPooling pooling;
            cv::Mat piped = pooling.computeDescriptors(gray, kps, *extractor, cfg);
            write_f32(outdir + "/" + t.name + ".pipeline.f32", piped);
            manifest << t.name << " pipeline " << piped.rows << " " << piped.cols << "\n";
        }
        if (argc == 5) {
            tp::wrappers::LibTorchWrapper patch(argv[4], 32, 2.0f, true, 0.0f, 1.0f, true, 1024,
                                                cv::INTER_LINEAR);
            cv::Mat raw = patch.extract(gray, kps, cfg.params);
            write_f32(outdir + "/PATCH.raw.f32", raw);
            manifest << "PATCH raw " << raw.rows << " " << raw.cols << "\n";
        }
    } catch (const std::exception& e) {
        std::cerr << "dw_libtorch: " << e.what() << "\n";
        return 1;
    }
    return 0;
}
