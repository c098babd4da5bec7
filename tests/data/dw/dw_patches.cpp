// descbench's harness for tests/data/dw/workbench_patches.npz (made by make_patch_fixtures.py).
//
// The patch arithmetic of the C++ DescriptorWorkbench's two patch wrappers at b834e17, written here
// from their source with the same OpenCV calls (nothing of the workbench is compiled or copied):
//   libtorch: src/core/descriptor/extractors/wrappers/LibTorchWrapper.cpp makePatch (121-142) and
//             matToTensor (151-165): rotation about (0, 0), translation set to n/2 - M p;
//   dnn:      DNNPatchWrapper.cpp makePatch_ (52-79): rotation about the keypoint, translation += n/2 - p.
// Usage: dw_patches <grey.png> <keypoints.txt> <n>; keypoints.txt holds "x y size angle" per line
// (hex floats, read as float). Writes to stdout, per keypoint: for libtorch then dnn the 2 x 3
// matrix (6 doubles) and the uint8 patch (n*n bytes); then float32 patches (n*n each): libtorch
// per-patch standardised, libtorch ImageNet (0.485 / 0.229), dnn /255 only, dnn per-patch
// standardised, dnn mean_std with mean 0.5 and std 0.25.
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

static void emit(const void* data, size_t bytes) { std::fwrite(data, 1, bytes, stdout); }

static void emitMat(const cv::Mat& m) {
    cv::Mat c = m.isContinuous() ? m : m.clone();
    emit(c.data, c.total() * c.elemSize());
}

int main(int argc, char** argv) {
    if (argc != 4) {
        std::fprintf(stderr, "usage: dw_patches grey.png keypoints.txt n\n");
        return 2;
    }
    const cv::Mat grey = cv::imread(argv[1], cv::IMREAD_UNCHANGED);
    if (grey.empty() || grey.type() != CV_8UC1) {
        std::fprintf(stderr, "need a uint8 grey image\n");
        return 2;
    }
    std::FILE* kf = std::fopen(argv[2], "r");
    const int n = std::atoi(argv[3]);
    float x, y, size, angle;
    while (std::fscanf(kf, "%a %a %a %a", &x, &y, &size, &angle) == 4) {
        const float turn = angle >= 0.0f ? -angle : 0.0f;  // both wrappers: upright (their default)

        // libtorch: side = size (clamped at 1e-3), as a radius mapped to n/2
        const float side = std::max(size, 1e-3f);
        const float half = side / 2.0f;
        const double s_lt = static_cast<double>(n) / (2.0 * static_cast<double>(half));
        cv::Mat m_lt = cv::getRotationMatrix2D(cv::Point2f(0.0f, 0.0f), turn, s_lt);
        const double mid = n * 0.5;
        m_lt.at<double>(0, 2) = mid - m_lt.at<double>(0, 0) * x - m_lt.at<double>(0, 1) * y;
        m_lt.at<double>(1, 2) = mid - m_lt.at<double>(1, 0) * x - m_lt.at<double>(1, 1) * y;
        cv::Mat u8_lt;
        cv::warpAffine(grey, u8_lt, m_lt, cv::Size(n, n), cv::INTER_LINEAR, cv::BORDER_REPLICATE);

        // dnn: side = max(1, 1.0 * max(size, 1)) (its default support multiplier 1.0)
        const float sz = std::max(size, 1.0f);
        const float big = std::max(1.0f, 1.0f * sz);
        const double s_dnn = static_cast<double>(n) / static_cast<double>(big);
        cv::Mat m_dnn = cv::getRotationMatrix2D(cv::Point2f(x, y), turn, s_dnn);
        m_dnn.at<double>(0, 2) += (n * 0.5 - x);
        m_dnn.at<double>(1, 2) += (n * 0.5 - y);
        cv::Mat u8_dnn;
        cv::warpAffine(grey, u8_dnn, m_dnn, cv::Size(n, n), cv::INTER_LINEAR, cv::BORDER_REPLICATE);

        emitMat(m_lt);
        emitMat(u8_lt);
        emitMat(m_dnn);
        emitMat(u8_dnn);

        // libtorch standardisations (matrix expressions, as the wrapper writes them)
        cv::Mat p_lt;
        u8_lt.convertTo(p_lt, CV_32F, 1.0 / 255.0);
        cv::Scalar mu, sd;
        cv::meanStdDev(p_lt, mu, sd);
        cv::Mat z = (p_lt - mu[0]) / (sd[0] + 1e-8);
        emitMat(z);
        const float im_mean = 0.485f, im_std = 0.229f;
        cv::Mat zi = (p_lt - im_mean) / im_std;
        emitMat(zi);

        // dnn standardisations
        cv::Mat p_dnn;
        u8_dnn.convertTo(p_dnn, CV_32F, 1.0 / 255.0);
        emitMat(p_dnn);
        cv::Scalar mu2, sd2;
        cv::meanStdDev(p_dnn, mu2, sd2);
        const float den = static_cast<float>(std::max(sd2[0], static_cast<double>(1e-6f)));
        cv::Mat zd = (p_dnn - static_cast<float>(mu2[0])) / den;
        emitMat(zd);
        const float ms_mean = 0.5f, ms_std = 0.25f;
        cv::Mat zm = (p_dnn - ms_mean) / ms_std;
        emitMat(zm);
    }
    std::fclose(kf);
    return 0;
}
